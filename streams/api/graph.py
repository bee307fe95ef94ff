"""`GET /v1/graph`: the namespace's memories and the links between them, for the memory
browser's graph (processors/memory_graph.py says how links resolve)."""

from __future__ import annotations

from faust.web import Request, Response, View

from processors.access import Caller
from processors.memory_graph import memory_graph
from processors.parameters import integer
from stores.records import Records
from streams.api.auth import granted_namespace, personal_reader
from streams.api.pages import Pages
from streams.api.params import READER_PARAMS, Param, Params, value
from streams.plumbing.json_values import jsonable

# Memories drawn per request, by default and at most: a force layout in a browser stays
# readable and quick up to a few hundred nodes.
GRAPH_LIMIT = 300
MAX_GRAPH_LIMIT = 2000
LIMIT = integer(1, MAX_GRAPH_LIMIT)
GRAPH_PARAMS: Params = {**READER_PARAMS, "limit": Param(LIMIT)}


def wire_graph(pages: Pages, records: Records) -> None:
    @pages.page("/v1/graph", params=GRAPH_PARAMS)
    async def graph_view(web: View, request: Request, caller: Caller) -> Response:
        namespace = granted_namespace(caller, request.query)
        limit = value(request.query, "limit", LIMIT, GRAPH_LIMIT)
        # One more than asked tells whether the graph was cut.
        found = await records.graph_records(namespace, personal_reader(caller, request.query),
                                            limit + 1)
        graph = memory_graph(found[:limit])
        return web.json({"namespace": namespace, "truncated": len(found) > limit,
                         **jsonable(graph)})

