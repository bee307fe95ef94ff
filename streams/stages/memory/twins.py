"""Finding the twins of a batch of new memories. Each new memory's candidates are the live
memories of its namespace nearest to it in the index (streams/stages/neighbours.py) and the
earlier writes of its batch, at or above the retrieval model's `twin_candidate` cosine, that
the twin rule's guard lets it restate (processors/memory/twins.py, `folds`); the similarity
model (processors/text/calibration.py) then judges each pair by its cosine.

The guard comes first because it is cheap and the floor alone is not selective: e5-small-v2
puts 99% of LoCoMo's chat turns at 0.85 or more from an earlier one, and the guard leaves
none of them (another speaker, another turn of one speaker), so such writes cost no second
embedding."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from processors.consolidation.plan import candidate_of
from processors.memory.twins import Twin, folds, twin_of
from processors.text.embedding import Vector, embedding_text
from schemas.records import Record
from stores.index.protocol import VectorIndex
from streams.plumbing.runtime import Runtime
from streams.stages.neighbours import live_neighbours


class TwinFinder:
    def __init__(self, runtime: Runtime, index: VectorIndex, threshold: float) -> None:
        """`threshold`: the similarity model's cosine from which a restatement is a twin."""
        self._runtime = runtime
        self._index = index
        self._threshold = threshold

    async def twins(self, writes: Sequence[tuple[Record, Vector]]) -> dict[str, Twin]:
        """New record id -> the memory it restates, for the writes that restate one. A write
        that restates an earlier write of the batch restates what that one restates."""
        found: dict[str, Twin] = {}
        if not writes:
            return found
        floor = self._runtime.calibration.twin_candidate
        with self._runtime.stage("twins"):
            stored = await live_neighbours(self._runtime, self._index, writes, floor)
            # The batch against itself in one product: the pairs under the floor cost no
            # candidate and no guard.
            unit = _unit(np.stack([vector for _, vector in writes]))
            cosines = unit @ unit.T
            candidates: list[list[Record]] = []
            for position, (record, _) in enumerate(writes):
                earlier = [writes[other][0] for other in np.flatnonzero(
                    cosines[position, :position] >= floor).tolist()
                    if writes[other][0].namespace == record.namespace]
                new = candidate_of(record)
                candidates.append([near for near in [*(n for n, _ in stored[position]), *earlier]
                                   if folds(new, candidate_of(near))])
            judged = await self._judge_vectors(
                [record for (record, _), near in zip(writes, candidates, strict=True) if near]
                + [near for nears in candidates for near in nears])
            for (record, _), nears in zip(writes, candidates, strict=True):
                if not nears:
                    continue
                mine = judged[record.record_id]
                neighbours = [(candidate_of(near), float(mine @ judged[near.record_id]))
                              for near in nears]
                twin = twin_of(candidate_of(record), neighbours, self._threshold)
                if twin is not None:
                    found[record.record_id] = found.get(twin.record_id, twin)
        return found

    async def _judge_vectors(self, records: Sequence[Record]) -> dict[str, Vector]:
        """Record id -> its unit vector of the similarity model."""
        unique = list({record.record_id: record for record in records}.values())
        if not unique:
            return {}
        vectors = _unit(await self._runtime.similarity_vectors(
            [embedding_text(record.title, record.text) for record in unique]))
        return {record.record_id: vector
                for record, vector in zip(unique, vectors, strict=True)}


def _unit(vectors: Vector) -> Vector:
    matrix = np.asarray(vectors, dtype=np.float32)
    unit: Vector = matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    return unit
