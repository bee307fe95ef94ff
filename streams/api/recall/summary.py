"""`GET /v1/summary`: a memory-grounded summary of a search's hits within a token budget
(seed 000's `subagent_memory_search`), for an agent that wants to know what memory holds on a
topic without spending its context on the records whole.

    namespace, query, budget_tokens?, limit?, min_score?, run_id?, profile?, agent_id?, and
    the filters of /v1/search

The hits are those of `/v1/search` with the same parameters, the same key rules and the same
run budget (a summary is one search of the run). The summary is deterministic
(processors/recall/summary.py), counted in the model's tokens as the context pack counts them;
with the LLM hook configured it asks the hook to rewrite it, and keeps the rewrite only when
it cites exactly the same memories within the same budget (`rewritten` says which): a hook
that fails, is slow or strays answers the deterministic summary (fail open).
"""

from __future__ import annotations

import asyncio
from typing import Any

from faust.web import Request, Response, View

from processors.api.access import Caller
from processors.api.parameters import integer
from processors.recall.gaps import unanswered
from processors.recall.summary import MIN_BUDGET_TOKENS, SummaryHit, summarize
from stores.index.postgres_search import RecordsSearch
from stores.index.protocol import SearchIndex
from streams.api.auth import granted_namespace, reader_of
from streams.api.pages import Pages
from streams.api.params import Param, Params, value
from streams.api.recall.search import (
    DEFAULT_MIN_SCORE,
    SEARCH_PARAMS,
    SearchQuery,
    budget_exhausted,
    holds_records,
    recall,
    spend_search,
)
from streams.plumbing.llm_hook import summary_prose
from streams.plumbing.runtime import Runtime
from streams.reads.retrieval_log import RetrievalLog

# Seed 000's subagent_memory_search: a brief, not a context pack.
DEFAULT_BUDGET_TOKENS = 400
MAX_BUDGET_TOKENS = 4000

BUDGET_TOKENS = integer(MIN_BUDGET_TOKENS, MAX_BUDGET_TOKENS)
# A summary shows its memories, not how each was ranked: no `explain`.
SUMMARY_PARAMS: Params = {**{name: param for name, param in SEARCH_PARAMS.items()
                             if name != "explain"},
                          "budget_tokens": Param(BUDGET_TOKENS)}


def wire_summary(pages: Pages, runtime: Runtime, index: SearchIndex, fallback: RecordsSearch,
                 max_searches_per_run: int, retrievals: RetrievalLog) -> None:
    @pages.page("/v1/summary", params=SUMMARY_PARAMS)
    async def summary_view(web: View, request: Request, caller: Caller) -> Response:
        namespace = granted_namespace(caller, request.query)
        query = SearchQuery.from_params(request.query, reader_of(caller, request.query))
        budget = value(request.query, "budget_tokens", BUDGET_TOKENS, DEFAULT_BUDGET_TOKENS)
        if not await spend_search(runtime, namespace, query.run_id, max_searches_per_run):
            return web.json({**budget_exhausted(runtime, "/v1/summary", namespace, query.run_id,
                                                max_searches_per_run),
                             "summary": None, "memory_ids": []})
        answer = await summary_of(runtime, index, fallback, query, budget)
        retrievals.surfaced(namespace=namespace, query=query.query, route="/v1/summary",
                            record_ids=answer["memory_ids"], agent_id=query.scope.agent_id,
                            run_id=query.run_id)
        if unanswered(query.query, query.scope.min_score, answer["hits_found"],
                      DEFAULT_MIN_SCORE, request.query.keys()):
            retrievals.missed(namespace=namespace, query=query.query,
                              agent_id=query.scope.agent_id)
        return web.json({**answer, "budget_exhausted": False})


async def summary_of(runtime: Runtime, index: SearchIndex, fallback: RecordsSearch,
                     query: SearchQuery, budget_tokens: int) -> dict[str, Any]:
    """The summary of the hits of `query` (see the module docstring)."""
    found = await recall(runtime, index, fallback, query)
    hits = [SummaryHit(hit.record.record_id, hit.record.title, hit.record.text)
            for hit in found.hits]

    def count_tokens(text: str) -> int:
        return runtime.embedder.token_costs([text])[0]

    # Fitting the budget counts tokens with the model's tokenizer: off the event loop.
    summary = await asyncio.to_thread(summarize, query.query, hits, budget_tokens,
                                      count_tokens)
    prose = await summary_prose(runtime.llm, query.query, summary, budget_tokens,
                                count_tokens, runtime.metrics) if summary.memory_ids else None
    text = summary.text if prose is None else prose
    return {
        "namespace": query.scope.namespace,
        "namespace_holds_records": bool(hits) or await holds_records(
            runtime, query.scope.namespace),
        "query": query.query,
        "profile": query.profile.name,
        "degraded": found.degraded,
        "summary": text,
        "memory_ids": list(summary.memory_ids),
        "hits_found": len(hits),
        "hits_used": len(summary.memory_ids),
        "rewritten": prose is not None,
        "budget_tokens": budget_tokens,
        "tokens": summary.tokens if prose is None else await asyncio.to_thread(
            count_tokens, prose),
        "run_id": query.run_id,
    }
