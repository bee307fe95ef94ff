"""The live memories nearest to some new ones, as the write-time rules see them: for each, the
index's nearest memories of its partition (shared, or its owner's; of its type) at or above a
cosine, read back from Postgres as they are now, those merged or invalidated since left out.
The twin rule (streams/stages/twins.py) and the stale-fact rule (streams/stages/stale_facts.py)
look at these."""

from __future__ import annotations

from collections.abc import Sequence

from schemas.records import Record
from stores.pgvector import Vector
from stores.vector_index import SearchIndex, SearchScope
from streams.plumbing.runtime import Runtime

# Nearest stored memories looked at per memory: a twin or a stale fact is among the first.
NEIGHBOURS = 3


async def live_neighbours(runtime: Runtime, index: SearchIndex,
                          memories: Sequence[tuple[Record, Vector]], floor: float
                          ) -> list[list[tuple[Record, float]]]:
    """For each memory, its nearest other live memories at cosine >= `floor`, with their
    cosines, nearest first."""
    # One more than looked at: a memory stored already is its own nearest.
    hits = [await index.search(vector, SearchScope(
        record.namespace, limit=NEIGHBOURS + 1, min_score=floor,
        record_kinds=("memory",), agent_id=record.agent_id,
        memory_types=(record.memory_type,) if record.memory_type else (),
        review_states=("approved", "draft")))
        for record, vector in memories]
    wanted: dict[str, set[str]] = {}
    for (record, _), found in zip(memories, hits, strict=True):
        wanted.setdefault(record.namespace, set()).update(hit.record_id for hit in found)
    live: dict[str, Record] = {}
    for namespace, ids in wanted.items():
        if ids:
            for item in await runtime.stores.records.stored_records(namespace, sorted(ids)):
                if item.superseded_by is None and item.record.invalidated_by is None:
                    live[item.record.record_id] = item.record
    return [[(live[hit.record_id], hit.score) for hit in found
             if hit.record_id in live and hit.record_id != record.record_id][:NEIGHBOURS]
            for (record, _), found in zip(memories, hits, strict=True)]
