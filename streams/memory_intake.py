"""`memory.events` → validate → redact → embed → Postgres → index → `memory.updated`.

Two stages, so that the model works on one batch while the previous one is written:
`prepare` validates, redacts and starts embedding; `complete` stores, indexes and announces.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from processors.intake import Rejected, Rejection, parse_event
from processors.memories import check_references, memory_record
from schemas.events import MEMORY_EVENT_TYPES
from schemas.records import Record
from stores.repository import Vector
from streams.consolidation_requests import ConsolidationTrigger
from streams.messages import InboundMessage
from streams.runtime import (
    Runtime,
    send_dead_letters,
    start_embedding,
    store_and_announce,
    unannounced,
    until_done,
)

TOPIC = "memory.events"


@dataclass(frozen=True)
class PreparedWrites:
    rejected: list[tuple[InboundMessage, Rejection]]
    accepted: list[Record]
    todo: list[Record]
    vectors: asyncio.Task[Vector]


class MemoryWriter:
    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._trigger = ConsolidationTrigger(runtime)
        # Records accepted by `prepare` whose batch is not complete yet: later batches may
        # refer to them before they reach Postgres.
        self._in_flight: defaultdict[str, set[str]] = defaultdict(set)

    async def prepare(self, messages: Sequence[InboundMessage]) -> PreparedWrites:
        runtime = self._runtime
        rejected: list[tuple[InboundMessage, Rejection]] = []
        candidates: list[tuple[InboundMessage, Record]] = []
        with runtime.stage("validate"):
            for message in messages:
                try:
                    event = parse_event(message.value, MEMORY_EVENT_TYPES, runtime.max_event_bytes)
                    provenance = message.provenance(event.event_id, event.producer)
                    with runtime.stage("redact"):
                        record = memory_record(event, provenance)
                except Rejected as exc:
                    rejected.append((message, exc.rejection))
                    continue
                for kind, count in record.body["redactions"].items():
                    runtime.metrics.redactions.labels(kind).inc(count)
                candidates.append((message, record))

        known = await until_done(
            lambda: self._known_references([record for _, record in candidates]),
            what="reference lookup", topic=TOPIC, metrics=runtime.metrics,
        )
        accepted: list[Record] = []
        for message, record in candidates:
            try:
                check_references(record, known[record.namespace])
            except Rejected as exc:
                rejected.append((message, exc.rejection))
                continue
            accepted.append(record)
            known[record.namespace].add(record.record_id)
            self._in_flight[record.namespace].add(record.record_id)

        todo = await until_done(
            lambda: unannounced(runtime, accepted), what="replay check", topic=TOPIC,
            metrics=runtime.metrics,
        )
        return PreparedWrites(rejected, accepted, todo, start_embedding(runtime, todo))

    async def complete(self, prepared: PreparedWrites) -> None:
        runtime = self._runtime
        await send_dead_letters(runtime, prepared.rejected)
        vectors = await prepared.vectors
        await until_done(
            lambda: store_and_announce(runtime, prepared.todo, vectors),
            what="storing memories", topic=TOPIC, metrics=runtime.metrics,
        )
        for record in prepared.accepted:
            self._in_flight[record.namespace].discard(record.record_id)
        runtime.metrics.consolidation_counted.inc(len(prepared.todo))
        await until_done(
            lambda: self._trigger.request_due({record.namespace for record in prepared.todo}),
            what="requesting consolidation", topic=TOPIC, metrics=runtime.metrics)
        events = runtime.metrics.events
        events.labels(TOPIC, "memory.write", "stored").inc(len(prepared.todo))
        events.labels(TOPIC, "memory.write", "duplicate").inc(
            len(prepared.accepted) - len(prepared.todo))

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
