"""The one path every record change takes: store → count tokens → index → announce → mark
announced.

Memories, run digests, fix patterns, consolidations and refused writes (announced, not
stored as records) all go through here, so the error
handling lives in one place: each step runs under the stage's `Attempts` (transient failures
wait, unexpected ones are retried a few times), and a step that fails for good is applied to
halves of the batch down to the changes at fault. Those are returned with their error, for
the caller to dead-letter the events that caused them; the others go on.

Every step is idempotent (record ids are primary keys, index point ids derive from record
ids, announcement ids from (record, version, change)), so a batch interrupted anywhere is
completed by its replay. Announcements are made once: a change that may have been announced
before (stored by an earlier try that did not finish, or an announce step that is retried)
is first looked up in the announcement log.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from memstream_client.events import ChangeKind
from processors.text.embedding import Vector
from processors.text.lexical import record_vector
from schemas.records import Record
from schemas.topics import MEMORY_UPDATED
from stores.index.payload import index_payload
from stores.index.protocol import IndexPoint, VectorIndex
from streams.plumbing.failures import Attempts, Isolated
from streams.plumbing.messages import InboundMessage, seconds_since
from streams.plumbing.runtime import Runtime
from streams.stages.announcements import announcement, event_id_of

# Producer and broker clocks differ, and a message's timestamp is set when its batch is
# made: read the log from this long before the first try.
READ_BACK_MARGIN_S = 60.0


@dataclass(frozen=True)
class RecordChange:
    record: Record
    change: ChangeKind
    version: int
    # The record's vector; None when the change takes it out of the index.
    vector: Vector | None
    # The consumed events that caused the change: dead-lettered if it is refused.
    sources: tuple[InboundMessage, ...] = ()
    # Set when an earlier try may have announced it already: read back from then on.
    maybe_announced_since: datetime | None = None
    # The lifecycle event that made the change (update, deprecate, review, restore).
    cause_event_id: str | None = None
    # Why, where the change has a reason (a refused write's rule).
    reason: str | None = None

    @property
    def record_id(self) -> str:
        return self.record.record_id


class RecordSink:
    def __init__(self, runtime: Runtime, index: VectorIndex) -> None:
        self._runtime = runtime
        self._index = index

    async def unannounced(self, records: Sequence[Record]) -> set[str]:
        """The ids of the records that have not been announced yet: a replayed record that
        was announced is done and skipped whole."""
        ids = {record.record_id for record in records}
        return ids - await self._runtime.stores.records.announced_record_ids(ids)

    async def unannounced_refusals(self, records: Sequence[Record]) -> set[str]:
        """The ids of the refused writes whose refusal has not been announced yet."""
        ids = {record.record_id for record in records}
        return ids - await self._runtime.stores.records.announced_refusal_ids(ids)

    async def store_new(self, changes: Sequence[RecordChange],
                        attempts: Attempts) -> Isolated[RecordChange]:
        """Store new records with their first version, then publish them. A record stored
        by an earlier try is kept as it is, and checked against the log before it is
        announced."""
        records = self._runtime.stores.records
        stored = await self._insert(
            changes, attempts, "storing records",
            lambda part: records.insert_records([(c.record, _vector(c)) for c in part]))
        published = await self.publish(stored.done, attempts)
        return Isolated(published.done, stored.failed + published.failed)

    async def publish(self, changes: Sequence[RecordChange],
                      attempts: Attempts) -> Isolated[RecordChange]:
        """Count, index, announce and mark announced changes that Postgres already holds."""
        counted = await attempts.isolating(changes, self._store_text_tokens,
                                           what="counting records' tokens")
        indexed = await attempts.isolating(counted.done, self._update_index,
                                           what="indexing records")
        announced = await attempts.isolating(
            indexed.done, _Announce(self._runtime, self._runtime.stores.records.mark_announced),
            what="announcing records")
        self._count(announced.done)
        return Isolated(announced.done, counted.failed + indexed.failed + announced.failed)

    async def store_refused(self, changes: Sequence[RecordChange],
                            attempts: Attempts) -> Isolated[RecordChange]:
        """Record refused writes (change `refused`, each with its reason), then announce
        them. Nothing reaches the records or the index: a refusal is announced under the id
        its record would have had, and marked announced in `refused_writes`."""
        records = self._runtime.stores.records
        stored = await self._insert(
            changes, attempts, "recording refused writes",
            lambda part: records.insert_refused_writes([(c.record, _reason(c)) for c in part]))
        announced = await attempts.isolating(
            stored.done, _Announce(self._runtime, records.mark_refusals_announced),
            what="announcing refused writes")
        self._count(announced.done)
        return Isolated(announced.done, stored.failed + announced.failed)

    async def _insert(
        self, changes: Sequence[RecordChange], attempts: Attempts, what: str,
        insert: Callable[[Sequence[RecordChange]], Awaitable[Mapping[str, datetime]]],
    ) -> Isolated[RecordChange]:
        """Insert the changes in parts (down to those Postgres refuses), `insert` answering
        when an earlier try had inserted each of the part's already: those may have been
        announced since, and are read back before they are announced again."""
        before: dict[str, datetime] = {}

        async def step(part: Sequence[RecordChange]) -> None:
            with self._runtime.stage("postgres"):
                before.update(await insert(part))

        stored = await attempts.isolating(changes, step, what=what)
        return Isolated([_maybe_announced(change, before.get(change.record_id))
                         for change in stored.done], stored.failed)

    async def _store_text_tokens(self, changes: Sequence[RecordChange]) -> None:
        """Keep the text of each record the index will hold in the model's tokens, before it
        is searchable: a pack prices what it reads by this count (streams/reads/context.py)."""
        kept = [change for change in changes if change.vector is not None]
        if not kept:
            return
        costs = await asyncio.to_thread(self._runtime.embedder.token_costs,
                                        [change.record.text for change in kept])
        with self._runtime.stage("postgres"):
            await self._runtime.stores.records.store_text_tokens(
                [(change.record_id, change.record.text, cost)
                 for change, cost in zip(kept, costs, strict=True)])

    async def _update_index(self, changes: Sequence[RecordChange]) -> None:
        index = self._index
        with self._runtime.stage("index"):
            await index.upsert([
                IndexPoint(change.record_id, change.vector,
                           index_payload(change.record.model_dump()),
                           record_vector(change.record))
                for change in changes if change.vector is not None])
            await index.delete([change.record_id for change in changes
                                if change.vector is None])

    def _count(self, changes: Sequence[RecordChange]) -> None:
        metrics = self._runtime.metrics
        now = datetime.now(UTC)
        for change in changes:
            if change.change == "created":
                metrics.records.labels(change.record.record_kind).inc()
                metrics.end_to_end_lag.labels(change.record.provenance.source_topic).observe(
                    seconds_since(change.record.created_at, now))
        metrics.produced.labels(MEMORY_UPDATED).inc(len(changes))


class _Announce:
    """The announce step. It remembers when it was first tried: a retry may follow a produce
    the broker wrote but did not acknowledge, so it reads back from then on."""

    def __init__(self, runtime: Runtime,
                 mark: Callable[[Sequence[str]], Awaitable[None]]) -> None:
        self._runtime = runtime
        # Where the changes are marked announced: records, or refused writes.
        self._mark = mark
        self._first_tried_at: float | None = None

    async def __call__(self, changes: Sequence[RecordChange]) -> None:
        runtime = self._runtime
        messages = [announcement(c.record, c.change, c.version, c.cause_event_id, c.reason)
                    for c in changes]
        since = [c.maybe_announced_since.timestamp() for c in changes
                 if c.maybe_announced_since is not None]
        if self._first_tried_at is not None:
            since.append(self._first_tried_at)
        else:
            self._first_tried_at = time.time()
        with runtime.stage("announce"):
            if since:
                made = await runtime.announcements.event_ids_since(
                    min(since) - READ_BACK_MARGIN_S)
                messages = [m for m in messages if event_id_of(m) not in made]
            await runtime.producer.produce(messages)
            await self._mark([c.record_id for c in changes])


def _vector(change: RecordChange) -> Vector:
    if change.vector is None:
        raise ValueError(f"record {change.record_id}: a new record needs its vector")
    return change.vector


def _reason(change: RecordChange) -> str:
    if change.reason is None:
        raise ValueError(f"record {change.record_id}: a refused write needs its reason")
    return change.reason


def _maybe_announced(change: RecordChange, stored_at: datetime | None) -> RecordChange:
    return change if stored_at is None else replace(change, maybe_announced_since=stored_at)
