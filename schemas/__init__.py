"""Contracts of the worker's own: pydantic models of records, the topic catalogue, and the
exported JSON Schemas of the events (whose models are the client's wire contract,
`memstream_client.events`, in the client's distribution)."""
