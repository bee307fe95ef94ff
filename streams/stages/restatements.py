"""What a batch of new memories restates: for each, the live memories of its partition nearest
to it in the index (and the earlier writes of its batch), read from Postgres, and two rules
over them: its twin (processors/duplicates.py: the same fact said again, which the write is
folded into) and the memories it finds stale (processors/invalidation.py: the same statement
with another value, which the write invalidates).

One search of the index serves both rules. A write that cannot invalidate anything (a
question, a quoted turn, nothing that could be a value) is searched only for its twin, and
not at all when twins are off: most writes of a conversation cost nothing here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from processors.consolidation import ConsolidationCandidate
from processors.consolidation_plan import candidate_of
from processors.duplicates import Twin, twin_of
from processors.invalidation import Invalidation, may_invalidate, stale_among
from schemas.records import Record
from stores.pgvector import Vector
from stores.vector_index import SearchIndex, SearchScope
from streams.plumbing.runtime import Runtime

# Nearest stored memories looked at per write: a twin or a stale memory is among the first.
NEIGHBOURS = 3

Neighbours = list[tuple[ConsolidationCandidate, float]]


@dataclass(frozen=True)
class Restated:
    # New record id -> the memory it restates (folded into it, not stored); None for a write
    # an earlier try folded already (its fold is finished, not done again).
    twins: dict[str, Twin | None] = field(default_factory=dict)
    # New record id -> the live memories it restates with another value.
    stale: dict[str, list[Invalidation]] = field(default_factory=dict)

    def stale_in_batch(self) -> set[str]:
        """The new records that a later write of their own batch finds stale."""
        return {found.older_id for found_stale in self.stale.values() for found in found_stale}


class RestatementFinder:
    """`twin_cosine` and `stale_cosine`: each rule's threshold, None when the rule is off."""

    def __init__(self, runtime: Runtime, index: SearchIndex, twin_cosine: float | None,
                 stale_cosine: float | None) -> None:
        self._runtime = runtime
        self._index = index
        self._twin_cosine = twin_cosine
        self._stale_cosine = stale_cosine

    @property
    def active(self) -> bool:
        return self._twin_cosine is not None or self._stale_cosine is not None

    async def restated(self, writes: Sequence[tuple[Record, Vector]]) -> Restated:
        """The twins and stale memories of these writes. A write that restates an earlier
        write of the batch restates what that one restates."""
        found = Restated()
        candidates = [candidate_of(record) for record, _ in writes]
        searched = [position for position, candidate in enumerate(candidates)
                    if self._twin_cosine is not None or self._invalidates(candidate)]
        if not searched:
            return found
        floor = min(threshold for threshold in (self._twin_cosine, self._stale_cosine)
                    if threshold is not None)
        with self._runtime.stage("restatements"):
            stored = await self._stored_neighbours([writes[p] for p in searched], floor)
            # The batch against itself in one product: the pairs under the floor, nearly all
            # of them, cost no candidate and no rule.
            unit = np.stack([vector for _, vector in writes]).astype(np.float32)
            unit /= np.maximum(np.linalg.norm(unit, axis=1, keepdims=True), 1e-12)
            cosines = unit @ unit.T
            for position, near in zip(searched, stored, strict=True):
                record, candidate = writes[position][0], candidates[position]
                neighbours: Neighbours = [(candidate_of(other), cosine) for other, cosine in near]
                neighbours += [
                    (candidates[earlier], float(cosines[position, earlier]))
                    for earlier in np.flatnonzero(cosines[position, :position] >= floor).tolist()
                    if writes[earlier][0].namespace == record.namespace]
                twin = None if self._twin_cosine is None else \
                    twin_of(candidate, neighbours, self._twin_cosine)
                if twin is not None:
                    found.twins[record.record_id] = found.twins.get(twin.record_id, twin)
                elif self._invalidates(candidate):
                    assert self._stale_cosine is not None
                    stale = stale_among(candidate, neighbours, self._stale_cosine)
                    if stale:
                        found.stale[record.record_id] = stale
        return found

    def _invalidates(self, candidate: ConsolidationCandidate) -> bool:
        return self._stale_cosine is not None and may_invalidate(candidate)

    async def _stored_neighbours(self, writes: Sequence[tuple[Record, Vector]], floor: float
                                 ) -> list[list[tuple[Record, float]]]:
        hits = [await self._index.search(vector, SearchScope(
            record.namespace, limit=NEIGHBOURS, min_score=floor,
            record_kinds=("memory",), agent_id=record.agent_id,
            memory_types=(record.memory_type,) if record.memory_type else (),
            review_states=("approved", "draft")))
            for record, vector in writes]
        wanted: dict[str, set[str]] = {}
        for (record, _), near in zip(writes, hits, strict=True):
            wanted.setdefault(record.namespace, set()).update(hit.record_id for hit in near)
        live: dict[str, Record] = {}
        for namespace, ids in wanted.items():
            if ids:
                for item in await self._runtime.stores.records.stored_records(namespace,
                                                                          sorted(ids)):
                    if item.superseded_by is None and item.record.invalidated_by is None:
                        live[item.record.record_id] = item.record
        return [[(live[hit.record_id], hit.score) for hit in near if hit.record_id in live]
                for near in hits]
