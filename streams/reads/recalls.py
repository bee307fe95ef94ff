"""The recalls an agent makes (a search, a summary, a context pack, a session's wake), as the
HTTP face and the sessions ask for them: one made for a run is one search of the run's budget
(`MEMSTREAM_MAX_SEARCHES_PER_RUN`; a budget that cannot be kept lets the recall go on, since
a budget must not make memory fail), what it surfaced goes to the retrieval log, and one that
asked a question over the whole namespace and showed nothing is queued as a gap
(processors/recall/gaps.py). Each names its `source` in the log: the route it was asked by."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from processors.recall.gaps import unanswered
from stores.index.postgres_search import RecordsSearch
from stores.index.protocol import SearchIndex
from streams.plumbing.config import MemoryFlags
from streams.plumbing.runtime import Runtime
from streams.reads.context import ContextPack, ContextQuery, build_context
from streams.reads.retrieval_log import RetrievalLog
from streams.reads.search import DEFAULT_MIN_SCORE, Searched, SearchQuery, search
from streams.reads.summary import Summary, summary_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Exhausted:
    """A recall the run's search budget refused: `run_id` made its `max_searches_per_run`."""

    namespace: str
    run_id: str | None
    max_searches_per_run: int


class Recalls:
    def __init__(self, runtime: Runtime, index: SearchIndex, fallback: RecordsSearch,
                 retrievals: RetrievalLog, flags: MemoryFlags,
                 max_searches_per_run: int) -> None:
        self._runtime = runtime
        self._index, self._fallback = index, fallback
        self._retrievals = retrievals
        self.flags = flags
        self._max_searches_per_run = max_searches_per_run

    async def search(self, query: SearchQuery, source: str) -> Searched | Exhausted:
        """A search, or, without a query, a search by related ids."""
        scope = query.scope
        if not await self._spend(scope.namespace, query.run_id, source):
            return self._exhausted(scope.namespace, query.run_id)
        searched = await search(self._runtime, self._index, self._fallback, query)
        shown = searched.record_ids
        self._retrievals.surfaced(namespace=scope.namespace, query=query.asked, route=source,
                                  record_ids=shown, agent_id=scope.agent_id,
                                  run_id=query.run_id)
        self._note(query.query, scope.min_score, len(shown), query.narrowed, scope.namespace,
                   scope.agent_id)
        return searched

    async def summary(self, query: SearchQuery, budget_tokens: int,
                      source: str) -> Summary | Exhausted:
        """What memory holds on the query, within `budget_tokens`."""
        scope = query.scope
        if not await self._spend(scope.namespace, query.run_id, source):
            return self._exhausted(scope.namespace, query.run_id)
        summary = await summary_of(self._runtime, self._index, self._fallback, query,
                                   budget_tokens)
        self._retrievals.surfaced(namespace=scope.namespace, query=query.query, route=source,
                                  record_ids=summary.memory_ids, agent_id=scope.agent_id,
                                  run_id=query.run_id)
        self._note(query.query, scope.min_score, summary.hits_found, query.narrowed,
                   scope.namespace, scope.agent_id)
        return summary

    async def context(self, query: ContextQuery, source: str) -> ContextPack | Exhausted:
        """The context pack for the query (memory enabled: MEMORY_ENABLED)."""
        scope = query.scope
        if not await self._spend(scope.namespace, query.run_id, source):
            return self._exhausted(scope.namespace, query.run_id)
        pack = await build_context(self._runtime, self._index, self._fallback, self.flags,
                                   query)
        self._retrievals.surfaced(namespace=scope.namespace, query=query.query, route=source,
                                  record_ids=pack.retrieved_ids, agent_id=scope.agent_id,
                                  run_id=query.run_id)
        # A pack that searched no memory, or whose memory sections failed, does not say
        # what memory holds.
        if pack.says_what_memory_holds:
            self._note(query.query, scope.min_score, pack.found, query.narrowed,
                       scope.namespace, scope.agent_id)
        return pack

    def _note(self, query: str, min_score: float, shown: int, narrowed: bool, namespace: str,
              agent_id: str | None) -> None:
        if unanswered(query, min_score, shown, DEFAULT_MIN_SCORE, narrowed):
            self._retrievals.missed(namespace=namespace, query=query, agent_id=agent_id)

    async def _spend(self, namespace: str, run_id: str | None, source: str) -> bool:
        """Count a recall made for `run_id` (if any); False once the run has made more than
        it may, counted by `source`."""
        if run_id is None:
            return True
        try:
            spent = await self._runtime.stores.retrievals.spend_search(namespace, run_id)
        except Exception as exc:
            log.warning("could not count a search of run %s: %s", run_id, exc)
            return True
        if spent <= self._max_searches_per_run:
            return True
        self._runtime.metrics.search_budget_exhausted.labels(source).inc()
        return False

    def _exhausted(self, namespace: str, run_id: str | None) -> Exhausted:
        return Exhausted(namespace, run_id, self._max_searches_per_run)
