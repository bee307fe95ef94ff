"""`GET /v1/search`: hybrid search within one namespace (streams/reads/search.py), or, with
`related_id` (repeatable) and no query, the records that list those ids (seed 000's
`card_memory_search`), with the same visibility and filters."""

from __future__ import annotations

from faust.web import Request, View

from memstream_client.answers.recall import SearchAnswer
from processors.api.access import Caller
from streams.api.auth import granted_namespace, reader_of
from streams.api.pages import Pages
from streams.api.queries import SEARCH_PARAMS, search_query
from streams.api.rendering import search_answer
from streams.reads.recalls import Exhausted, Recalls

ROUTE = "/v1/search"


def wire_search(pages: Pages, recalls: Recalls) -> None:
    @pages.page(ROUTE, params=SEARCH_PARAMS, answer=SearchAnswer)
    async def search_view(web: View, request: Request, caller: Caller) -> SearchAnswer:
        """Hybrid search within one namespace, or the records that list the related ids."""
        granted_namespace(caller, request.query)
        query = search_query(request.query, reader_of(caller, request.query))
        searched = await recalls.search(query, ROUTE)
        if isinstance(searched, Exhausted):
            return SearchAnswer(namespace=searched.namespace, run_id=searched.run_id,
                                budget_exhausted=True,
                                max_searches_per_run=searched.max_searches_per_run, hits=[])
        return search_answer(searched)
