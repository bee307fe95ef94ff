"""The worker's long-lived resources and the one path every record takes to become durable,
searchable and announced."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol, TypeVar

import numpy as np

from embedder.model import Embedder
from processors.consolidation import ConsolidationSettings
from processors.consolidation_trigger import TriggerRules
from processors.embedding_text import embedding_text
from processors.fix_patterns import DEFAULT_FIX_WINDOW
from processors.ids import change_event_id
from processors.intake import Rejection
from schemas.events import ChangeKind, MemoryUpdated
from schemas.records import Record
from stores.index_payload import index_payload
from stores.repository import Repository, Vector
from stores.vector_index import IndexPoint, VectorIndex
from streams.dead_letters import dead_letter
from streams.llm_hook import ChatEndpoint
from streams.messages import InboundMessage, Outbound, seconds_since
from streams.metrics import Metrics

log = logging.getLogger(__name__)

T = TypeVar("T")

UPDATES_TOPIC = "memory.updated"


class Producer(Protocol):
    async def produce(self, messages: Sequence[Outbound]) -> None:
        """Send all messages and return once the broker has acknowledged every one."""


@dataclass(frozen=True)
class Runtime:
    repository: Repository
    index: VectorIndex
    embedder: Embedder
    metrics: Metrics
    producer: Producer
    max_event_bytes: int
    fix_window: timedelta = DEFAULT_FIX_WINDOW
    # The optional LLM hook; None keeps every text deterministic.
    llm: ChatEndpoint | None = None
    trigger_rules: TriggerRules = field(default_factory=TriggerRules)
    consolidation: ConsolidationSettings = field(default_factory=ConsolidationSettings)

    async def embed(self, texts: Sequence[str]) -> Vector:
        if not texts:
            return np.zeros((0, self.embedder.dimension), dtype=np.float32)
        started = time.perf_counter()
        # onnxruntime releases the GIL, so the event loop keeps serving while it computes.
        vectors = await asyncio.to_thread(self.embedder.embed, list(texts))
        self.metrics.embed_seconds.observe(time.perf_counter() - started)
        self.metrics.embed_batch_size.observe(len(texts))
        return vectors

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        yield
        self.metrics.stage_seconds.labels(name).observe(time.perf_counter() - started)


async def unannounced(runtime: Runtime, records: Sequence[Record]) -> list[Record]:
    """The records, once each, that have not been announced yet: a replayed record that
    was announced is done and skipped whole."""
    unique = list({record.record_id: record for record in records}.values())
    done = await runtime.repository.announced_record_ids(r.record_id for r in unique)
    return [record for record in unique if record.record_id not in done]


def start_embedding(runtime: Runtime, records: Sequence[Record]) -> asyncio.Task[Vector]:
    """Embed the records in the background, so that other work overlaps the model."""
    texts = [embedding_text(record.title, record.text) for record in records]
    return asyncio.ensure_future(runtime.embed(texts))


async def store_and_announce(
    runtime: Runtime, records: Sequence[Record], vectors: Vector,
    change: ChangeKind = "created",
) -> None:
    """Store, index and announce embedded records.

    Each step is idempotent, so a batch interrupted anywhere is completed by its replay:
    the record_id primary key, the deterministic point id and the change event id make
    every repeat an overwrite.
    """
    if not records:
        return
    with runtime.stage("postgres"):
        await runtime.repository.insert_records(list(zip(records, vectors, strict=True)))
    with runtime.stage("index"):
        await runtime.index.upsert(
            [
                IndexPoint(record.record_id, vector, index_payload(record.model_dump()))
                for record, vector in zip(records, vectors, strict=True)
            ]
        )
    with runtime.stage("announce"):
        await runtime.producer.produce([announcement(record, change) for record in records])
        await runtime.repository.mark_announced([record.record_id for record in records])
    now = datetime.now(UTC)
    for record in records:
        runtime.metrics.records.labels(record.record_kind).inc()
        runtime.metrics.end_to_end_lag.labels(record.provenance.source_topic).observe(
            seconds_since(record.created_at, now)
        )
    runtime.metrics.produced.labels(UPDATES_TOPIC).inc(len(records))


async def persist_and_announce(runtime: Runtime, records: Sequence[Record]) -> list[Record]:
    """Embed, store, index and announce the records not yet announced; return those."""
    todo = await unannounced(runtime, records)
    if todo:
        await store_and_announce(runtime, todo, await start_embedding(runtime, todo))
    return todo


async def send_dead_letters(
    runtime: Runtime, rejected: Sequence[tuple[InboundMessage, Rejection]]
) -> None:
    """Count and dead-letter rejected messages, in the order they were consumed."""
    if not rejected:
        return
    in_order = sorted(rejected, key=lambda item: (item[0].partition, item[0].offset))
    for message, rejection in in_order:
        runtime.metrics.dlq.labels(message.topic, rejection.reason).inc()
        runtime.metrics.events.labels(message.topic, "rejected", "dlq").inc()
    topic = in_order[0][0].topic
    await until_done(
        lambda: runtime.producer.produce([dead_letter(m, r) for m, r in in_order]),
        what="dead-lettering", topic=topic, metrics=runtime.metrics,
    )


def announcement(record: Record, change: ChangeKind, version: int = 1) -> Outbound:
    update = MemoryUpdated(
        event_id=change_event_id(record.record_id, version, change),
        change=change,
        record_id=record.record_id,
        record_kind=record.record_kind,
        namespace=record.namespace,
        version=version,
        occurred_at=record.created_at,
        provenance=record.provenance,
    )
    return Outbound(
        topic=UPDATES_TOPIC,
        key=record.record_id.encode(),
        value=update.model_dump_json().encode(),
    )


async def until_done(
    step: Callable[[], Awaitable[T]], *, what: str, topic: str, metrics: Metrics
) -> T:
    """Run `step` until it succeeds, backing off between tries.

    A batch whose sink fails must not be acknowledged (its offsets would be committed and
    the records lost), so the partition waits for Postgres, the index or the broker to come
    back instead of moving on.
    """
    delay = 0.1
    while True:
        try:
            return await step()
        except Exception:
            log.exception("%s failed for a batch from %s; retrying in %.1fs", what, topic, delay)
            metrics.retries.labels(topic).inc()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
