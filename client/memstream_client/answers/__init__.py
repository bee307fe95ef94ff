"""The API's answers, declared once: the worker renders them, the SDK reads them, the OpenAPI
document describes them (base.py says how). One module per area of the API."""
