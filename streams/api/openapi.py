"""`GET /v1/openapi.json`: the OpenAPI 3.1 document of the HTTP API, built from the routes as
the app registered them (processors/api/openapi.py), so that clients in other languages can be
generated from it (docs/http-api.md). Public, as /healthz is: it is the API's shape, which
tells nothing of any namespace."""

from __future__ import annotations

from faust.web import Request, View

from memstream_client.answers.status import ApiDocument
from processors.api.openapi import openapi_document
from streams.api.pages import Pages
from streams.api.params import NO_PARAMS

TITLE = "memstream"
DESCRIPTION = (
    "Long-term memory for AI agents: search, the context pack, records and their history, "
    "writes (published to Kafka and applied by the worker: 202), sessions, runs, keys. "
    "Every route but /healthz, /metrics, /ui and this document takes an API key as "
    "`Authorization: Bearer msk_...`. Every answer is described by its schema; what each "
    "field means is in docs/http-api.md.")


def wire_openapi(pages: Pages) -> None:
    """Serve the document of every route `pages` serves, this one included: built when it
    is asked for, by when every route is registered."""

    @pages.page("/v1/openapi.json", public=True, params=NO_PARAMS, answer=ApiDocument)
    async def openapi_view(web: View, request: Request) -> ApiDocument:
        """The OpenAPI 3.1 document of this API."""
        return ApiDocument(**openapi_document(pages.routes, title=TITLE,
                                              description=DESCRIPTION))
