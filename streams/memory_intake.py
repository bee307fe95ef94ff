"""`memory.events` → validate → redact → Postgres → embed → index → `memory.updated`."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from processors.intake import Rejected, Rejection, parse_event
from processors.memories import check_references, memory_record
from schemas.events import MEMORY_EVENT_TYPES
from schemas.records import Record
from streams.messages import InboundMessage
from streams.runtime import Runtime, persist_and_announce, send_dead_letters, until_done

TOPIC = "memory.events"


async def store_memory_writes(runtime: Runtime, messages: Sequence[InboundMessage]) -> None:
    metrics = runtime.metrics
    dead: list[tuple[InboundMessage, Rejection]] = []
    candidates: list[tuple[InboundMessage, Record]] = []
    with runtime.stage("validate"):
        for message in messages:
            try:
                event = parse_event(message.value, MEMORY_EVENT_TYPES, runtime.max_event_bytes)
                provenance = message.provenance(event.event_id, event.producer)
                with runtime.stage("redact"):
                    record = memory_record(event, provenance)
            except Rejected as rejected:
                dead.append((message, rejected.rejection))
                continue
            for kind, count in record.body["redactions"].items():
                metrics.redactions.labels(kind).inc(count)
            candidates.append((message, record))

    known = await until_done(
        lambda: _known_references(runtime, [record for _, record in candidates]),
        what="reference lookup", topic=TOPIC, metrics=metrics,
    )
    accepted: list[Record] = []
    for message, record in candidates:
        try:
            check_references(record, known[record.namespace])
        except Rejected as rejected:
            dead.append((message, rejected.rejection))
            continue
        accepted.append(record)
        # Later writes in this batch may refer to this one.
        known[record.namespace].add(record.record_id)

    await send_dead_letters(runtime, dead)
    stored = await until_done(
        lambda: persist_and_announce(runtime, accepted), what="storing memories", topic=TOPIC,
        metrics=metrics,
    )
    metrics.events.labels(TOPIC, "memory.write", "stored").inc(len(stored))
    metrics.events.labels(TOPIC, "memory.write", "duplicate").inc(len(accepted) - len(stored))


async def _known_references(runtime: Runtime, records: Sequence[Record]) -> dict[str, set[str]]:
    wanted: dict[str, set[str]] = defaultdict(set)
    for record in records:
        wanted[record.namespace].update(record.related_ids)
    known: dict[str, set[str]] = defaultdict(set)
    for namespace, ids in wanted.items():
        if ids:
            known[namespace] = await runtime.repository.existing_record_ids(namespace, ids)
    return known
