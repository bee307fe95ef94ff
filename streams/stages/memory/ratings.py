"""`memory.rate` → the agent's ratings stored, each memory's score inputs moved, and the gap
it names counted (its secrets redacted, as every gap's: stores/recall/gaps.py), in one transaction
(stores/recall/ratings.py).

A rating comes on `memory.events` with the memory changes, and is applied in their order
after its batch's writes (streams/stages/memory/lifecycle.py): a memory written just before
it in the partition is stored by then. Every memory it names must exist and be one the rater
may read (processors/recall/ratings.py); one that is not dead-letters the whole event as
`broken_reference`, naming it. A replay of an applied event changes nothing: its event id
is in `memory_valuations`.
"""

from __future__ import annotations

from memstream_client.events import MemoryRate
from processors.recall.ratings import Owner, check_rateable
from stores.recall.ratings import Gap, NewRating
from streams.plumbing.runtime import Runtime


class RatingApplier:
    def __init__(self, runtime: Runtime) -> None:
        self._records = runtime.stores.records
        self._ratings = runtime.stores.ratings

    async def apply_one(self, event: MemoryRate) -> str:
        """`rated`, or `duplicate` for an event applied before; raises `Rejected` for one
        that names a memory its rater may not rate."""
        payload = event.payload
        memory_ids = [rating.memory_id for rating in payload.ratings]
        found = await self._records.records_by_id(event.namespace, memory_ids)
        check_rateable(payload.agent_id, event.namespace, memory_ids,
                       {record_id: Owner(record.scope, record.agent_id)
                        for record_id, record in found.items()})
        gap = None if payload.gap is None else Gap(payload.gap, payload.gap_query)
        applied = await self._ratings.apply_rating(NewRating(
            event.event_id, event.namespace, payload.agent_id, event.occurred_at,
            [(rating.memory_id, rating.useful) for rating in payload.ratings], gap))
        return "rated" if applied else "duplicate"
