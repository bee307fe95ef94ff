"""`memory.events` → validate → redact → embed → the record sink → `memory.updated`; the
lifecycle events among them go to streams/memory_lifecycle.py.

Two stages, so that the model works on one batch while the previous one is written:
`prepare` validates, redacts and starts embedding; `complete` dead-letters what was rejected
and hands the rest to the sink, which dead-letters what the stores refuse.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

from processors.errors import Rejected, Rejection, Unexpected
from processors.intake import Parsed, parse_event
from processors.memories import check_references, memory_record, with_context
from schemas.events import MEMORY_EVENT_TYPES, MemoryWrite
from schemas.records import Record
from schemas.topics import MEMORY_EVENTS
from stores.repository import Vector
from streams.consolidation_requests import ConsolidationTrigger
from streams.dead_letters import send_dead_letters
from streams.embedding import embedded, start_embedding
from streams.memory_lifecycle import Lifecycle, LifecycleApplier
from streams.messages import InboundMessage
from streams.record_sink import RecordChange, RecordSink
from streams.runtime import Runtime


@dataclass(frozen=True)
class PreparedWrites:
    rejected: list[tuple[InboundMessage, Rejection]]
    # Accepted and not announced before, with the message each came from.
    todo: list[tuple[InboundMessage, Record]]
    # Accepted, and announced before: a replay.
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
                 state: WriterState, lifecycle: LifecycleApplier) -> None:
        self._runtime = runtime
        self._sink = sink
        self._lifecycle = lifecycle
        self._trigger = trigger
        self._attempts = runtime.attempts(MEMORY_EVENTS)
        self._state = state
        self._in_flight = state.in_flight

    async def prepare(self, messages: Sequence[InboundMessage]) -> PreparedWrites:
        runtime = self._runtime
        rejected: list[tuple[InboundMessage, Rejection]] = []
        candidates: list[tuple[InboundMessage, Record]] = []
        lifecycle: list[Lifecycle] = []
        with runtime.stage("validate"):
            for message in messages:
                try:
                    parsed = parse_event(message.value, MEMORY_EVENT_TYPES,
                                         runtime.max_event_bytes)
                    if isinstance(parsed.event, MemoryWrite):
                        candidates.append((message, self._record_of(
                            message, Parsed(parsed.event, parsed.sanitized))))
                    else:
                        lifecycle.append((message, Parsed(parsed.event, parsed.sanitized)))
                except Rejected as exc:
                    rejected.append((message, exc.rejection))
                except Exception as exc:
                    # A pure step gives the same answer every time: no use retrying it.
                    rejected.append((message, Unexpected.of(exc).rejection))

        candidates = await self._with_context(candidates)
        known = await self._attempts.until_done(
            lambda: self._known_references([record for _, record in candidates]),
            what="reference lookup")
        accepted: list[tuple[InboundMessage, Record]] = []
        for message, record in candidates:
            try:
                check_references(record, known[record.namespace])
            except Rejected as exc:
                rejected.append((message, exc.rejection))
                continue
            accepted.append((message, record))
            known[record.namespace].add(record.record_id)
            self._in_flight[record.namespace].add(record.record_id)

        fresh = await self._attempts.until_done(
            lambda: self._sink.unannounced([record for _, record in accepted]),
            what="replay check")
        todo: list[tuple[InboundMessage, Record]] = []
        for message, record in accepted:
            if record.record_id in fresh:
                fresh.discard(record.record_id)  # an event twice in one batch: stored once
                todo.append((message, record))
        return PreparedWrites(rejected, todo, len(accepted) - len(todo),
                              start_embedding(runtime, [record for _, record in todo]),
                              lifecycle)

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
        vectors, refused = await embedded(runtime, self._attempts, prepared.todo,
                                          prepared.vectors)
        changes = [RecordChange(record, "created", 1, vector, (message,))
                   for (message, record), vector in vectors]
        stored = await self._sink.store_new(changes, self._attempts)
        refused += [(change.sources[0], error.rejection) for change, error in stored.failed]
        await send_dead_letters(runtime, refused)
        for _, record in prepared.todo:
            self._in_flight[record.namespace].discard(record.record_id)
        runtime.metrics.consolidation_counted.inc(len(stored.done))
        await self._trigger.request_due({change.record.namespace for change in stored.done},
                                        self._attempts)
        events = runtime.metrics.events
        events.labels(MEMORY_EVENTS, "memory.write", "stored").inc(len(stored.done))
        events.labels(MEMORY_EVENTS, "memory.write", "duplicate").inc(prepared.duplicates)
        await self._lifecycle.apply(prepared.lifecycle)

    async def _with_context(
        self, candidates: list[tuple[InboundMessage, Record]]
    ) -> list[tuple[InboundMessage, Record]]:
        """Each memory of a thread with the memory before it in the thread as its context: the
        one this writer saw last, else the latest stored."""
        unknown: defaultdict[str, set[str]] = defaultdict(set)
        for _, record in candidates:
            if record.thread is not None and \
                    (record.namespace, record.thread) not in self._state.threads:
                unknown[record.namespace].add(record.thread)
        stored: dict[tuple[str, str], Record] = {}
        for namespace, threads in unknown.items():
            last = await self._attempts.until_done(
                partial(self._runtime.repository.last_in_threads, namespace, threads),
                what="thread lookup")
            stored.update(((namespace, thread), record) for thread, record in last.items())
        placed = []
        for message, record in candidates:
            if record.thread is not None:
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
                stored = await self._runtime.repository.existing_record_ids(namespace, ids)
                known[namespace] = stored | (ids & self._in_flight[namespace])
        return known
