"""Facts that go stale (processors/knowledge/stale_facts.py), found off the write path: on a
timer, the memories stored since the last tick, the first stored first, each compared with its
nearest live memories (streams/stages/neighbours.py); what one restates with another value is
invalidated through the lifecycle (a version `invalidated`, or a pending diff under review),
then the memory is marked checked.

Why not at write time: each comparison is a search of the index, which during a
consolidation waits on the index's writes; made by the writer, it held every write behind it
(write->searchable p50 0.15 s -> 2 s during a consolidation of 10,000 memories, the pipeline
0.71 -> 0.61 of the raw embedder). Here it costs the writes nothing, and a stale fact leaves
recall a tick after its correction is searchable. A memory compared twice (a crash between
its invalidations and its mark, two workers) invalidates nothing twice: an invalidation is
named by the write and the memory it makes stale (client/memstream_client/ids.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from functools import partial

from processors.consolidation.plan import candidate_of
from processors.events.errors import MemstreamError
from processors.knowledge.stale_facts import Invalidation, may_invalidate, stale_among
from schemas.records import Record
from schemas.topics import MEMORY_EVENTS
from stores.index.protocol import VectorIndex
from streams.plumbing.runtime import Runtime
from streams.stages.memory.lifecycle import LifecycleApplier
from streams.stages.neighbours import live_neighbours

log = logging.getLogger(__name__)

# Memories read per tick, and the time a tick may spend comparing them: the index's searches
# run on the event loop, so a tick yields between memories and stops at its budget; what is
# left waits for the next tick (measured: comparing every due memory at once held the writes
# behind it, write->searchable p50 0.15 s -> 2 s during a consolidation).
PER_TICK = 200
TICK_BUDGET_S = 0.1


class StaleFactFinder:
    def __init__(self, runtime: Runtime, index: VectorIndex, lifecycle: LifecycleApplier) -> None:
        self._runtime = runtime
        self._index = index
        self._lifecycle = lifecycle
        self._attempts = runtime.attempts(MEMORY_EVENTS)

    async def check_some(self) -> int:
        """Compare the memories stored since the last tick with their neighbours, within the
        tick's budget, and invalidate what they make stale; how many were compared."""
        records = self._runtime.stores.records
        started = time.monotonic()
        checked: list[str] = []
        compared = 0
        for item in await records.unchecked_memories(PER_TICK):
            if time.monotonic() - started > TICK_BUDGET_S:
                break
            checked.append(item.record.record_id)
            # A memory out of force, or one that cannot make anything stale (a question, a
            # quoted turn, an event of its day), costs no search.
            if item.superseded_by is not None or item.record.invalidated_by is not None \
                    or item.vector is None or not may_invalidate(candidate_of(item.record)):
                continue
            with self._runtime.stage("stale_facts"):
                [near] = await live_neighbours(self._runtime, self._index,
                                               [(item.record, item.vector)],
                                               self._runtime.calibration.stale)
                for found in stale_among(candidate_of(item.record),
                                         [(candidate_of(other), cosine) for other, cosine in near],
                                         self._runtime.calibration.stale):
                    await self._invalidate(item.record, found)
            compared += 1
            await asyncio.sleep(0)
        await records.mark_checked(checked)
        return compared

    async def _invalidate(self, newer: Record, found: Invalidation) -> None:
        """Apply one invalidation; one that fails for good is logged and counted, and the
        memories stay as they are."""
        events = self._runtime.metrics.events
        try:
            await self._attempts.until_done(
                partial(self._lifecycle.invalidate, newer, found),
                what="invalidating a stale memory")
            events.labels(MEMORY_EVENTS, "memory.write", "invalidating").inc()
        except MemstreamError as error:
            log.warning("%s could not invalidate %s: %s", newer.record_id, found.older_id,
                        error.rejection.detail)
            events.labels(MEMORY_EVENTS, "memory.write", "invalidation_failed").inc()
