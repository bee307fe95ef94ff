"""`GET /v1/summary`: a memory-grounded summary of a search's hits within a token budget
(seed 000's `subagent_memory_search`; streams/reads/summary.py), for an agent that wants to
know what memory holds on a topic without spending its context on the records whole.

    namespace, query, budget_tokens?, limit?, min_score?, run_id?, profile?, agent_id?, and
    the filters of /v1/search

The hits are those of `/v1/search` with the same parameters, the same key rules and the same
run budget (a summary is one search of the run).
"""

from __future__ import annotations

from faust.web import Request, View

from memstream_client.answers.recall import MemorySummary
from processors.api.access import Caller
from processors.api.parameters import integer
from processors.recall.summary import MIN_BUDGET_TOKENS
from streams.api.auth import granted_namespace, reader_of
from streams.api.pages import Pages
from streams.api.params import Param, Params, value
from streams.api.queries import SEARCH_PARAMS, search_query
from streams.api.rendering import contest_answer
from streams.reads.recalls import Exhausted, Recalls
from streams.reads.summary import DEFAULT_BUDGET_TOKENS, MAX_BUDGET_TOKENS

ROUTE = "/v1/summary"
BUDGET_TOKENS = integer(MIN_BUDGET_TOKENS, MAX_BUDGET_TOKENS)
# A summary shows its memories, not how each was ranked: no `explain`.
SUMMARY_PARAMS: Params = {**{name: param for name, param in SEARCH_PARAMS.items()
                             if name != "explain"},
                          "budget_tokens": Param(BUDGET_TOKENS)}


def wire_summary(pages: Pages, recalls: Recalls) -> None:
    @pages.page(ROUTE, params=SUMMARY_PARAMS, answer=MemorySummary)
    async def summary_view(web: View, request: Request, caller: Caller) -> MemorySummary:
        """What memory holds on the query, within a token budget."""
        granted_namespace(caller, request.query)
        query = search_query(request.query, reader_of(caller, request.query))
        budget = value(request.query, "budget_tokens", BUDGET_TOKENS, DEFAULT_BUDGET_TOKENS)
        summary = await recalls.summary(query, budget, ROUTE)
        if isinstance(summary, Exhausted):
            return MemorySummary(namespace=summary.namespace, run_id=summary.run_id,
                                 budget_exhausted=True,
                                 max_searches_per_run=summary.max_searches_per_run,
                                 summary=None, memory_ids=[])
        answer = MemorySummary(
            namespace=query.scope.namespace, namespace_holds_records=summary.holds_records,
            query=query.query, profile=query.profile.name, degraded=summary.degraded,
            summary=summary.text, memory_ids=list(summary.memory_ids),
            hits_found=summary.hits_found, hits_used=len(summary.memory_ids),
            rewritten=summary.rewritten, budget_tokens=summary.budget_tokens,
            tokens=summary.tokens, run_id=query.run_id, budget_exhausted=False)
        if not summary.contested:
            return answer
        # Absent when nothing it cites is contested.
        return answer.model_copy(update={"contested": [contest_answer(contest)
                                                        for contest in summary.contested]})
