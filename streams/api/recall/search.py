"""`GET /v1/search`: hybrid search within one namespace (streams/reads/search.py), or, with
`related_id` (repeatable) and no query, the records that list those ids (seed 000's
`card_memory_search`), with the same visibility and filters."""

from __future__ import annotations

from faust.web import Request, Response, View

from processors.api.access import Caller
from streams.api.auth import granted_namespace, reader_of
from streams.api.pages import Pages
from streams.api.queries import SEARCH_PARAMS, search_query
from streams.api.rendering import exhausted_answer, search_answer
from streams.reads.recalls import Exhausted, Recalls

ROUTE = "/v1/search"


def wire_search(pages: Pages, recalls: Recalls) -> None:
    @pages.page(ROUTE, params=SEARCH_PARAMS)
    async def search_view(web: View, request: Request, caller: Caller) -> Response:
        granted_namespace(caller, request.query)
        query = search_query(request.query, reader_of(caller, request.query))
        searched = await recalls.search(query, ROUTE)
        if isinstance(searched, Exhausted):
            return web.json({**exhausted_answer(searched), "hits": []})
        return web.json(search_answer(searched))
