"""`GET /v1/context`: the context pack of seed 002's read path (streams/reads/context.py).

    namespace, query, run_id?, error?, budget_tokens?, profile?, agent_id?, min_score?,
    planning_ref? (with one repo), shares?, and the filters of /v1/search

The pack is read as the key's agent (or the one an admin key names); with memory disabled
(MEMORY_ENABLED=false) it is empty and says so; one pack is one search of the run's budget.
"""

from __future__ import annotations

from faust.web import Request, View

from memstream_client.answers.recall import ContextPack
from processors.api.access import Caller
from streams.api.auth import granted_namespace, reader_of
from streams.api.pages import Pages
from streams.api.queries import CONTEXT_PARAMS, context_query
from streams.api.rendering import context_answer, exhausted_pack
from streams.reads.recalls import Exhausted, Recalls

ROUTE = "/v1/context"


def wire_context(pages: Pages, recalls: Recalls) -> None:
    @pages.page(ROUTE, params=CONTEXT_PARAMS, answer=ContextPack)
    async def context_view(web: View, request: Request, caller: Caller) -> ContextPack:
        """The context pack for a task: core blocks, planning, history, memories, documents."""
        namespace = granted_namespace(caller, request.query)
        query = context_query(request.query, recalls.flags, reader_of(caller, request.query))
        if not recalls.flags.enabled:
            return ContextPack(namespace=namespace, enabled=False, sections={}, tokens=0,
                               degraded=[])
        pack = await recalls.context(query, ROUTE)
        if isinstance(pack, Exhausted):
            return exhausted_pack(pack)
        return context_answer(pack)
