"""The gap keeper: a timer of the worker that owns the index (`MEMSTREAM_GAP_INTERVAL_S`),
which groups new gaps and resolves the open ones whose question a later memory answers
(processors/recall/gaps.py; docs/retrieval.md#gaps).

Each pass, bounded:

1. Up to `GROUPS_PER_PASS` new groups are embedded (their first question) and each folded
   into the nearest older group of its namespace at or above the similarity model's
   same-question cosine.
2. Up to `CHECKS_PER_PASS` open gaps whose namespace announced a record since the gap was
   last met or last asked again are asked again, as a recall would ask them: the hybrid
   search of /v1/search, with the default profile and minimum score, for the gap's agent
   (its personal memories and the shared ones; a gap of no agent, the shared ones alone),
   restricted to records created after the gap was last met. Its best hit resolves the gap,
   with that record's id and relevance. A namespace that announced nothing since costs
   nothing: no search is made for its gaps.

Asking again, rather than matching each new memory against the open gaps, keeps "answers the
question" meaning exactly what a recall would show: the same ranking, relevance and visibility, and
whatever the search comes to weigh. It lives in the read core, beside search, because it is a
recall; like the retrieval log, it keeps bookkeeping of reads, never a record. Several workers share
the work: each claims the gaps it asks for `LEASE_S`, and a claim left by a worker that died runs
out. Two that embed the same new group place it once: the second finds it placed.
"""

from __future__ import annotations

import logging

from processors.recall.ranking import PROFILES
from processors.text.calibration import SIMILARITY
from stores.index.postgres_search import RecordsSearch
from stores.index.protocol import SearchIndex, SearchScope
from stores.recall.gaps import Answer, DueCheck
from streams.plumbing.runtime import Runtime
from streams.reads.search import DEFAULT_MIN_SCORE, hybrid_search

log = logging.getLogger(__name__)

GROUPS_PER_PASS = 50
CHECKS_PER_PASS = 20
# Longer than a pass of CHECKS_PER_PASS searches on a loaded worker.
LEASE_S = 120.0


class GapKeeper:
    def __init__(self, runtime: Runtime, index: SearchIndex, fallback: RecordsSearch) -> None:
        self._runtime = runtime
        self._gaps = runtime.stores.gaps
        self._index, self._fallback = index, fallback

    async def keep(self) -> None:
        """One pass: group, then resolve."""
        await self.place_new_groups()
        await self.check_open_gaps()

    async def place_new_groups(self) -> int:
        """Place the oldest unplaced groups; return how many."""
        groups = await self._gaps.unplaced_groups(GROUPS_PER_PASS)
        if not groups:
            return 0
        # Whether two questions ask the same thing is the similarity model's to judge;
        # both sides are queries.
        vectors = await self._runtime.judge_embed([group.question for group in groups],
                                                  role="query")
        for group, vector in zip(groups, vectors, strict=True):
            await self._gaps.place_group(group.group_id, group.namespace, vector,
                                         SIMILARITY.same_question)
        return len(groups)

    async def check_open_gaps(self) -> int:
        """Ask the due gaps again; return how many this resolved."""
        resolved = 0
        for check in await self._gaps.due_checks(CHECKS_PER_PASS, LEASE_S):
            if await self._gaps.checked(check, await self._answer(check)):
                resolved += 1
                self._runtime.metrics.gaps_resolved.inc()
        return resolved

    async def _answer(self, check: DueCheck) -> Answer | None:
        found = await hybrid_search(
            self._runtime, self._index, self._fallback, check.text,
            SearchScope(check.namespace, 1, DEFAULT_MIN_SCORE,
                        record_kinds=PROFILES["default"].record_kinds, agent_id=check.agent_id,
                        since=check.last_seen.timestamp()),
            PROFILES["default"])
        if not found.hits:
            return None
        best = found.hits[0]
        return Answer(best.record.record_id, best.relevance)
