"""Finding the twins of a batch of new memories: for each, the live memories of its
namespace nearest to it in the index (and the earlier writes of its batch), read from
Postgres, and the rule of processors/duplicates.py."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from processors.consolidation_plan import candidate_of
from processors.duplicates import Twin, twin_of
from schemas.records import Record
from stores.pgvector import Vector
from stores.vector_index import SearchIndex, SearchScope
from streams.plumbing.runtime import Runtime

# Nearest stored memories looked at per write: the twin, if any, is among the first.
NEIGHBOURS = 3


class TwinFinder:
    def __init__(self, runtime: Runtime, index: SearchIndex, threshold: float) -> None:
        self._runtime = runtime
        self._index = index
        self._threshold = threshold

    async def twins(self, writes: Sequence[tuple[Record, Vector]]) -> dict[str, Twin]:
        """New record id -> the memory it restates, for the writes that restate one. A write
        that restates an earlier write of the batch restates what that one restates."""
        found: dict[str, Twin] = {}
        if not writes:
            return found
        with self._runtime.stage("twins"):
            stored = await self._stored_neighbours(writes)
            # The batch against itself in one product: the pairs under the threshold, nearly
            # all of them, cost no candidate and no guard.
            unit = np.stack([vector for _, vector in writes]).astype(np.float32)
            unit /= np.maximum(np.linalg.norm(unit, axis=1, keepdims=True), 1e-12)
            cosines = unit @ unit.T
            for position, (record, _) in enumerate(writes):
                neighbours = [(candidate_of(near), cosine) for near, cosine in stored[position]]
                neighbours += [
                    (candidate_of(writes[earlier][0]), float(cosines[position, earlier]))
                    for earlier in np.flatnonzero(
                        cosines[position, :position] >= self._threshold).tolist()
                    if writes[earlier][0].namespace == record.namespace]
                twin = twin_of(candidate_of(record), neighbours, self._threshold)
                if twin is not None:
                    found[record.record_id] = found.get(twin.record_id, twin)
        return found

    async def _stored_neighbours(self, writes: Sequence[tuple[Record, Vector]]
                                 ) -> list[list[tuple[Record, float]]]:
        hits = [await self._index.search(vector, SearchScope(
            record.namespace, limit=NEIGHBOURS, min_score=self._threshold,
            record_kinds=("memory",), agent_id=record.agent_id,
            memory_types=(record.memory_type,) if record.memory_type else (),
            review_states=("approved", "draft")))
            for record, vector in writes]
        wanted: dict[str, set[str]] = {}
        for (record, _), found in zip(writes, hits, strict=True):
            wanted.setdefault(record.namespace, set()).update(hit.record_id for hit in found)
        live: dict[str, Record] = {}
        for namespace, ids in wanted.items():
            if ids:
                for item in await self._runtime.stores.records.stored_records(namespace,
                                                                          sorted(ids)):
                    if item.superseded_by is None:
                        live[item.record.record_id] = item.record
        return [[(live[hit.record_id], hit.score) for hit in found if hit.record_id in live]
                for found in hits]

