"""A memory-grounded summary of a search's hits within a token budget (seed 000's
`subagent_memory_search`): the hits of the same search, condensed deterministically
(processors/recall/summary.py), counted in the model's tokens as the context pack counts
them; with the LLM hook configured, the hook's rewrite is kept only when it cites exactly the
same memories within the same budget (`rewritten` says which): a hook that fails, is slow or
strays leaves the deterministic summary (fail open)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from processors.recall.contested import Contest
from processors.recall.summary import SummaryHit, summarize
from stores.index.postgres_search import RecordsSearch
from stores.index.protocol import SearchIndex
from streams.plumbing.llm_hook import summary_prose
from streams.plumbing.runtime import Runtime
from streams.reads.search import SearchQuery, holds_records, recall

# Seed 000's subagent_memory_search: a brief, not a context pack.
DEFAULT_BUDGET_TOKENS = 400
MAX_BUDGET_TOKENS = 4000


@dataclass(frozen=True)
class Summary:
    query: SearchQuery
    text: str
    # The memories it cites, and how many hits it was made from.
    memory_ids: tuple[str, ...]
    hits_found: int
    rewritten: bool
    budget_tokens: int
    tokens: int
    degraded: bool
    holds_records: bool
    # The contests of the memories it cites (processors/recall/contested.py).
    contested: tuple[Contest, ...] = ()


async def summary_of(runtime: Runtime, index: SearchIndex, fallback: RecordsSearch,
                     query: SearchQuery, budget_tokens: int) -> Summary:
    """The summary of the hits of `query` (see the module docstring)."""
    found = await recall(runtime, index, fallback, query)
    hits = [SummaryHit(hit.record.record_id, hit.record.title, hit.record.text,
                       hit.record.contested)
            for hit in found.hits]

    def count_tokens(text: str) -> int:
        return runtime.embedder.token_costs([text])[0]

    # Fitting the budget counts tokens with the model's tokenizer: off the event loop.
    summary = await asyncio.to_thread(summarize, query.query, hits, budget_tokens,
                                      count_tokens)
    prose = await summary_prose(runtime.llm, query.query, summary, budget_tokens,
                                count_tokens, runtime.metrics) if summary.memory_ids else None
    return Summary(
        query=query,
        text=summary.text if prose is None else prose,
        memory_ids=tuple(summary.memory_ids),
        hits_found=len(hits),
        rewritten=prose is not None,
        budget_tokens=budget_tokens,
        tokens=summary.tokens if prose is None else await asyncio.to_thread(
            count_tokens, prose),
        degraded=found.degraded,
        holds_records=bool(hits) or await holds_records(runtime, query.scope.namespace),
        contested=summary.contested,
    )
