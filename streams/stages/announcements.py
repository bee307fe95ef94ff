"""Announcements on `memory.updated`, and reading back which were already made.

An announcement's event id is a function of (record, version, change), and it travels in
the header `memstream.event_id` too, so that the log can be read back without parsing values.

Why read back: a record is marked announced in Postgres after the broker acknowledged its
announcement. A worker killed between the two (or a produce whose acknowledgement was lost and
is retried) leaves a record stored, announced, and not marked; its replay would announce it a
second time. Before re-announcing anything that may have been announced, the sink asks this
log which of the event ids memory.updated already holds since the first try.
"""

from __future__ import annotations

from aiokafka import AIOKafkaConsumer, TopicPartition

from memstream_client.events import ChangeKind, MemoryUpdated
from memstream_client.ids import change_event_id
from publisher.kafka_security import KafkaSecurity
from schemas.records import Record
from schemas.topics import MEMORY_UPDATED
from streams.plumbing.messages import Outbound
from streams.plumbing.topics import partitions_of

EVENT_ID_HEADER = "memstream.event_id"


def announcement(record: Record, change: ChangeKind, version: int = 1,
                 cause_event_id: str | None = None, reason: str | None = None) -> Outbound:
    update = MemoryUpdated(
        event_id=change_event_id(record.record_id, version, change, cause_event_id),
        change=change,
        record_id=record.record_id,
        record_kind=record.record_kind,
        namespace=record.namespace,
        version=version,
        occurred_at=record.created_at,
        provenance=record.provenance,
        cause_event_id=cause_event_id,
        reason=reason,
    )
    return Outbound(
        topic=MEMORY_UPDATED,
        key=record.record_id.encode(),
        value=update.model_dump_json().encode(),
        headers=((EVENT_ID_HEADER, update.event_id.encode()),),
    )


def event_id_of(message: Outbound) -> str:
    return dict(message.headers)[EVENT_ID_HEADER].decode()


class KafkaAnnouncementLog:
    """Reads memory.updated from a moment to its current end, without a consumer group."""

    def __init__(self, bootstrap: str, security: KafkaSecurity) -> None:
        self._bootstrap = bootstrap
        self._security = security

    async def event_ids_since(self, since_epoch_s: float) -> set[str]:
        consumer = AIOKafkaConsumer(bootstrap_servers=self._bootstrap,
                                    client_id="memstream-announcement-log",
                                    enable_auto_commit=False, isolation_level="read_committed",
                                    **self._security.client_options())
        partitions = await partitions_of(self._bootstrap, MEMORY_UPDATED, self._security)
        await consumer.start()
        try:
            return await _read_since(consumer, partitions, since_epoch_s)
        finally:
            await consumer.stop()


async def _read_since(consumer: AIOKafkaConsumer, partitions: list[TopicPartition],
                      since_epoch_s: float) -> set[str]:
    consumer.assign(partitions)
    ends = await consumer.end_offsets(partitions)
    starts = await consumer.offsets_for_times(
        {partition: int(since_epoch_s * 1000) for partition in partitions})
    remaining: set[TopicPartition] = set()
    for partition in partitions:
        found = starts.get(partition)
        if found is not None and found.offset < ends[partition]:
            consumer.seek(partition, found.offset)
            remaining.add(partition)
    event_ids: set[str] = set()
    while remaining:
        batches = await consumer.getmany(*remaining, timeout_ms=1000)
        for messages in batches.values():
            for message in messages:
                headers = dict(message.headers or ())
                if EVENT_ID_HEADER in headers:
                    event_ids.add(headers[EVENT_ID_HEADER].decode())
        for partition in list(remaining):
            if await consumer.position(partition) >= ends[partition]:
                remaining.discard(partition)
    return event_ids
