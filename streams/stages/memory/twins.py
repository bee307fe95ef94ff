"""Finding the twins of a batch of new memories: for each, the live memories of its
namespace nearest to it in the index (streams/stages/neighbours.py) and the earlier writes of
its batch, and the rule of processors/memory/twins.py."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from processors.consolidation.plan import candidate_of
from processors.memory.twins import Twin, twin_of
from processors.text.embedding import Vector
from schemas.records import Record
from stores.index.protocol import VectorIndex
from streams.plumbing.runtime import Runtime
from streams.stages.neighbours import live_neighbours


class TwinFinder:
    def __init__(self, runtime: Runtime, index: VectorIndex, threshold: float) -> None:
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
            stored = await live_neighbours(self._runtime, self._index, writes,
                                           self._threshold)
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
