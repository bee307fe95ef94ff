"""`memory.events` → validate → redact → refuse what is not worth retaining → embed → the
record sink → `memory.updated`; the lifecycle events among them go to
streams/stages/memory/lifecycle.py.

Two stages, so that the model works on one batch while the previous one is written:
`prepare` validates, redacts, sets apart the writes the refusal rules refuse
(processors/memory/refusal.py) and starts embedding the others; `complete` dead-letters what was
rejected, records and announces the refusals, and hands the rest to the sink, which
dead-letters what the stores refuse. A refused write was valid: it is no dead letter.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial

from memstream_client.events import MEMORY_EVENT_TYPES, MemoryWrite
from processors.events.errors import MemstreamError, Rejected, Rejection, Unexpected
from processors.events.intake import Parsed
from processors.memory.refusal import RefusalReason, refusal_of
from processors.memory.twins import Twin
from processors.memory.writes import check_references, memory_record, with_context
from processors.text.embedding import Vector
from schemas.records import Record
from schemas.topics import MEMORY_EVENTS
from streams.plumbing.dead_letters import send_dead_letters
from streams.plumbing.messages import InboundMessage
from streams.plumbing.runtime import Runtime
from streams.stages.consolidation.requests import ConsolidationTrigger
from streams.stages.embedding import embedded, start_embedding
from streams.stages.memory.lifecycle import Lifecycle, LifecycleApplier
from streams.stages.memory.twins import TwinFinder
from streams.stages.parsing import parse_batch
from streams.stages.record_sink import RecordChange, RecordSink


@dataclass(frozen=True)
class PreparedWrites:
    rejected: list[tuple[InboundMessage, Rejection]]
    # Accepted and not announced before, with the message each came from.
    todo: list[tuple[InboundMessage, Record]]
    # Accepted, refused by the rules as not worth retaining, and not announced before.
    refused: list[tuple[InboundMessage, Record, RefusalReason]]
    # Accepted, and announced before (stored or refused): a replay.
    duplicates: int
    vectors: asyncio.Task[Vector]
    # Updates, deprecations, reviews and restores, in the order they came: applied after
    # the batch's writes (which they may name), one at a time.
    lifecycle: list[Lifecycle]


@dataclass
class WriterState:
    """What a memory writer remembers between batches, and hands to the stages that replace
    it after a crash."""

    # Records accepted by `prepare` whose batch is not complete yet: later batches may refer
    # to them before they reach Postgres.
    in_flight: defaultdict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    # The last memory accepted in each (namespace, thread), the most recent threads only:
    # the context of the next memory of the thread, which may come before it is stored.
    threads: OrderedDict[tuple[str, str], Record] = field(default_factory=OrderedDict)

    def remember(self, record: Record) -> None:
        if record.thread is None:
            return
        key = (record.namespace, record.thread)
        self.threads[key] = record
        self.threads.move_to_end(key)
        while len(self.threads) > THREADS_REMEMBERED:
            self.threads.popitem(last=False)


THREADS_REMEMBERED = 10_000


class MemoryWriter:
    def __init__(self, runtime: Runtime, sink: RecordSink, trigger: ConsolidationTrigger,
                 state: WriterState, lifecycle: LifecycleApplier, *,
                 refuse_low_value: bool, twins: TwinFinder | None) -> None:
        self._runtime = runtime
        self._refuse_low_value = refuse_low_value
        self._twins = twins
        self._sink = sink
        self._lifecycle = lifecycle
        self._trigger = trigger
        self._attempts = runtime.attempts(MEMORY_EVENTS)
        self._state = state
        self._in_flight = state.in_flight

    async def prepare(self, messages: Sequence[InboundMessage]) -> PreparedWrites:
        batch = parse_batch(self._runtime, messages, MEMORY_EVENT_TYPES)
        rejected = list(batch.rejected)
        candidates: list[tuple[InboundMessage, Record]] = []
        lifecycle: list[Lifecycle] = []
        for message, parsed in batch.parsed:
            event = parsed.event
            if not isinstance(event, MemoryWrite):
                lifecycle.append((message, Parsed(event, parsed.sanitized)))
                continue
            try:
                candidates.append((message, self._record_of(
                    message, Parsed(event, parsed.sanitized))))
            except Rejected as exc:
                rejected.append((message, exc.rejection))
            except Exception as exc:
                # A pure step gives the same answer every time: no use retrying it.
                rejected.append((message, Unexpected.of(exc).rejection))

        refusals = self._refusals(record for _, record in candidates)
        candidates = await self._with_context(candidates, refusals)
        known = await self._attempts.until_done(
            lambda: self._known_references([record for _, record in candidates]),
            what="reference lookup")
        # Bad input is dead-lettered before any write is judged on its worth.
        kept: list[tuple[InboundMessage, Record]] = []
        declined: list[tuple[InboundMessage, Record]] = []
        for message, record in candidates:
            try:
                check_references(record, known[record.namespace])
            except Rejected as exc:
                rejected.append((message, exc.rejection))
                continue
            if record.record_id in refusals:
                declined.append((message, record))
                continue
            kept.append((message, record))
            known[record.namespace].add(record.record_id)
            self._in_flight[record.namespace].add(record.record_id)

        fresh = await self._attempts.until_done(
            lambda: self._sink.unannounced([record for _, record in kept]),
            what="replay check")
        unannounced_refusals = await self._attempts.until_done(
            lambda: self._sink.unannounced_refusals([record for _, record in declined]),
            what="replay check of refusals")
        todo = _first_of_each(kept, fresh)
        refused = [(message, record, refusals[record.record_id])
                   for message, record in _first_of_each(declined, unannounced_refusals)]
        return PreparedWrites(rejected, todo, refused,
                              len(kept) + len(declined) - len(todo) - len(refused),
                              start_embedding(self._runtime, [record for _, record in todo]),
                              lifecycle)

    def _refusals(self, records: Iterable[Record]) -> dict[str, RefusalReason]:
        """The record ids of the writes the rules refuse, with the rule's reason."""
        if not self._refuse_low_value:
            return {}
        reasons = {record.record_id: refusal_of(record.text, record.title)
                   for record in records}
        return {record_id: reason for record_id, reason in reasons.items()
                if reason is not None}

    def _record_of(self, message: InboundMessage, parsed: Parsed[MemoryWrite]) -> Record:
        provenance = message.provenance(parsed.event.event_id, parsed.event.producer)
        with self._runtime.stage("redact"):
            record = memory_record(parsed.event, provenance, parsed.sanitized)
        for kind, count in record.body["redactions"].items():
            self._runtime.metrics.redactions.labels(kind).inc(count)
        for name, count in parsed.sanitized.items():
            self._runtime.metrics.sanitized.labels(MEMORY_EVENTS, name).inc(count)
        return record

    async def complete(self, prepared: PreparedWrites) -> None:
        runtime = self._runtime
        await send_dead_letters(runtime, prepared.rejected)
        # While the model embeds the kept writes.
        refusals = await self._sink.store_refused(
            [RecordChange(record, "refused", 0, None, (message,), reason=reason)
             for message, record, reason in prepared.refused],
            self._attempts)
        vectors, failed = await embedded(runtime, self._attempts, prepared.todo,
                                         prepared.vectors)
        twins = await self._twins_of(vectors)
        changes = [RecordChange(record, "created", 1, vector, (message,))
                   for (message, record), vector in vectors if record.record_id not in twins]
        stored = await self._sink.store_new(changes, self._attempts)
        # After the new records: a write may restate one stored just now.
        for (message, record), _ in vectors:
            if record.record_id in twins:
                try:
                    await self._attempts.until_done(
                        partial(self._lifecycle.fold_into_twin, message, record,
                                twins[record.record_id]), what="folding a write into its twin")
                except MemstreamError as error:
                    failed.append((message, error.rejection))
        failed += [(change.sources[0], error.rejection)
                   for change, error in [*refusals.failed, *stored.failed]]
        await send_dead_letters(runtime, failed)
        for _, record in prepared.todo:
            self._in_flight[record.namespace].discard(record.record_id)
        runtime.metrics.consolidation_counted.inc(len(stored.done))
        await self._trigger.request_due({change.record.namespace for change in stored.done},
                                        self._attempts)
        events = runtime.metrics.events
        events.labels(MEMORY_EVENTS, "memory.write", "stored").inc(len(stored.done))
        events.labels(MEMORY_EVENTS, "memory.write", "restated").inc(len(twins))
        events.labels(MEMORY_EVENTS, "memory.write", "duplicate").inc(prepared.duplicates)
        events.labels(MEMORY_EVENTS, "memory.write", "refused").inc(len(refusals.done))
        for change in refusals.done:
            runtime.metrics.refused_writes.labels(change.reason).inc()
        await self._lifecycle.apply(prepared.lifecycle)

    async def _twins_of(self, vectors: Sequence[tuple[tuple[InboundMessage, Record], Vector]]
                        ) -> dict[str, Twin | None]:
        """The writes that restate a live memory -> that memory; a write folded by an earlier
        try -> None (its fold is finished, not done again)."""
        if self._twins is None or not vectors:
            return {}
        records = [record for (_, record), _ in vectors]
        folded = await self._attempts.until_done(
            partial(self._lifecycle.folded, [r.provenance.source_event_id for r in records]),
            what="replay check of twins")
        found: dict[str, Twin | None] = {r.record_id: None for r in records
                                         if r.provenance.source_event_id in folded}
        fresh = [(record, vector) for (_, record), vector in vectors
                 if record.record_id not in found]
        twins = self._twins
        found.update(await self._attempts.until_done(partial(twins.twins, fresh),
                                                     what="finding twins"))
        return found

    async def _with_context(
        self, candidates: list[tuple[InboundMessage, Record]], refused: Collection[str]
    ) -> list[tuple[InboundMessage, Record]]:
        """Each memory of a thread with the memory before it in the thread as its context: the
        one this writer saw last, else the latest stored. A refused write is not stored, so
        it is no memory's context."""
        unknown: defaultdict[str, set[str]] = defaultdict(set)
        for _, record in candidates:
            if record.thread is not None and record.record_id not in refused and \
                    (record.namespace, record.thread) not in self._state.threads:
                unknown[record.namespace].add(record.thread)
        stored: dict[tuple[str, str], Record] = {}
        for namespace, threads in unknown.items():
            last = await self._attempts.until_done(
                partial(self._runtime.stores.records.last_in_threads, namespace, threads),
                what="thread lookup")
            stored.update(((namespace, thread), record) for thread, record in last.items())
        placed = []
        for message, record in candidates:
            if record.thread is not None and record.record_id not in refused:
                key = (record.namespace, record.thread)
                record = with_context(record, self._state.threads.get(key, stored.get(key)))
                self._state.remember(record)
            placed.append((message, record))
        return placed

    async def _known_references(self, records: Sequence[Record]) -> dict[str, set[str]]:
        wanted: defaultdict[str, set[str]] = defaultdict(set)
        for record in records:
            wanted[record.namespace].update(record.related_ids)
        known: defaultdict[str, set[str]] = defaultdict(set)
        for namespace, ids in wanted.items():
            if ids:
                stored = await self._runtime.stores.records.existing_record_ids(namespace, ids)
                known[namespace] = stored | (ids & self._in_flight[namespace])
        return known


def _first_of_each(items: Sequence[tuple[InboundMessage, Record]],
                   wanted: set[str]) -> list[tuple[InboundMessage, Record]]:
    """The items whose record is wanted, each record once: an event twice in one batch is
    handled once."""
    wanted = set(wanted)
    first = []
    for message, record in items:
        if record.record_id in wanted:
            wanted.discard(record.record_id)
            first.append((message, record))
    return first
