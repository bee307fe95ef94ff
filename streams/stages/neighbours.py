"""The live memories nearest to some new ones, as the write-time rules see them: for each, the
index's nearest memories of its partition (shared, or its owner's; of its type) at or above a
cosine, read back from Postgres as they are now, those merged or invalidated since left out. The
twin rule (streams/stages/memory/twins.py) and the stale-fact rule
(streams/stages/knowledge/stale_facts.py) look at these.

How they are searched: the namespace alone, a few more points than wanted, and the partition
judged on each point's payload (`SearchScope.admits_point`). On the embedded engine a filter
of the whole partition is checked point by point over the points not yet in a graph, which
made each search cost 7x more (10.7 ms against 1.6 ms at 30k such points), and a namespace
filled by writes keeps up to `MEMSTREAM_INDEX_OPTIMIZE_AFTER` of them (docs/performance.md).
When the namespace's nearest points are that many and too few of them are in the partition,
the partition's own search decides, so the answer is the same as the filtered search's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from processors.text.embedding import Vector
from schemas.records import Record
from stores.index.protocol import IndexHit, SearchScope, VectorIndex
from streams.plumbing.runtime import Runtime

# Nearest stored memories looked at per memory: a twin or a stale fact is among the first.
NEIGHBOURS = 3
# Points of the namespace read per memory before the partition is judged.
NAMESPACE_NEAREST = 16


async def live_neighbours(runtime: Runtime, index: VectorIndex,
                          memories: Sequence[tuple[Record, Vector]], floor: float
                          ) -> list[list[tuple[Record, float]]]:
    """For each memory, its nearest other live memories at cosine >= `floor`, with their
    cosines, nearest first."""
    hits = []
    for record, vector in memories:
        hits.append(await partition_nearest(index, record, vector, floor))
        # Each search holds the event loop: reads waiting on it go between two.
        await asyncio.sleep(0)
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


async def partition_nearest(index: VectorIndex, record: Record, vector: Vector,
                             floor: float) -> list[IndexHit]:
    """The points of the record's partition nearest to it at cosine >= `floor`, one more
    than looked at: a memory stored already is its own nearest."""
    scope = SearchScope(record.namespace, limit=NEIGHBOURS + 1, min_score=floor,
                        record_kinds=("memory",), agent_id=record.agent_id,
                        memory_types=(record.memory_type,) if record.memory_type else (),
                        review_states=("approved", "draft"))
    found = await index.nearest(vector, record.namespace, NAMESPACE_NEAREST, floor)
    now = time.time()
    admitted = [hit for hit in found if scope.admits_point(hit.payload, now)]
    if len(found) < NAMESPACE_NEAREST or len(admitted) >= scope.limit:
        # Every point at or above the floor was read, or the partition's nearest are among
        # those read: nothing nearer in the partition was left out.
        return admitted[:scope.limit]
    return await index.search(vector, scope)
