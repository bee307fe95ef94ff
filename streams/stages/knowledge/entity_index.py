"""The entity index catching up with the records (stores/entities.py): on a timer, the records
the vector index holds whose current version's entities are not indexed yet, oldest first, in
batches. Reading a record's entities (processors/knowledge/entities.py) is pure Python: done here,
off the write path, a consolidation's thousands of merges cost the writes nothing; the rules run in
a thread between batches, so that the event loop keeps serving meanwhile."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from processors.knowledge.entities import RecordEntities, record_entities
from schemas.records import Record
from streams.plumbing.runtime import Runtime

# Records read per batch, and batches per tick at most: a tick never holds the worker long.
# At a tick every half second that is 400 records a second, above what one worker ingests; a
# backlog (a consolidation's merges, records loaded around the stream) is worked off at that
# pace rather than in one gulp that would hold up the writes (measured: write->searchable p50
# 0.3 s -> 1.8 s during a consolidation of 10,000 memories with 10 batches of 200 a tick).
BATCH = 100
BATCHES_PER_TICK = 2


class EntityIndexer:
    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    async def catch_up(self) -> int:
        """Index the entities of the records that are due, a few batches; how many."""
        entities = self._runtime.stores.entities
        indexed = 0
        for _ in range(BATCHES_PER_TICK):
            due = await entities.due(BATCH)
            if not due:
                break
            with self._runtime.stage("entities"):
                found = await asyncio.to_thread(_entities_of, due)
                await entities.index_entities(found)
            indexed += len(due)
            if len(due) < BATCH:
                break
        return indexed


def _entities_of(records: Sequence[tuple[Record, int]]) -> list[RecordEntities]:
    return [record_entities(record, version) for record, version in records]
