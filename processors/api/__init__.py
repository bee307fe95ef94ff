"""The HTTP API's rules, apart from any web framework: request parameters and their rules,
the cursors of listings, access by API key, and the OpenAPI document built from the routes."""
