"""The record sink on in-memory stores: store → index → announce → mark announced, the
changes at fault set apart, and every announcement made once, also across retries and
crashes."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
from aiokafka.errors import KafkaTimeoutError

from memstream_client.events import Provenance
from processors.events.errors import IndexRefused
from schemas.records import Record
from stores.index.protocol import IndexPoint
from streams.plumbing.failures import RetryPolicy
from streams.plumbing.messages import InboundMessage, Outbound
from streams.plumbing.metrics import Metrics
from streams.plumbing.runtime import Runtime
from streams.stages.announcements import event_id_of
from streams.stages.record_sink import RecordChange, RecordSink
from tests.unit.store_fakes import InMemoryRecords, InMemoryStores, WordCounter

FAST = RetryPolicy(first_delay_s=0.001, max_delay_s=0.002, unexpected_attempts=2)


class Index:
    def __init__(self, refuse: frozenset[str] = frozenset()) -> None:
        self.points: dict[str, IndexPoint] = {}
        self.refuse = refuse

    async def upsert(self, points: Sequence[IndexPoint]) -> None:
        for point in points:
            if point.record_id in self.refuse:
                raise IndexRefused(f"{point.record_id}: a zero vector")
        self.points.update((point.record_id, point) for point in points)

    async def delete(self, record_ids: Sequence[str]) -> None:
        for record_id in record_ids:
            self.points.pop(record_id, None)


class Topic:
    """memory.updated: the producer appends, the announcement log reads back."""

    def __init__(self, lose_acks: int = 0) -> None:
        self.messages: list[tuple[float, Outbound]] = []
        # Sends the broker writes but whose acknowledgement is lost on the way back.
        self.lose_acks = lose_acks

    async def produce(self, messages: Sequence[Outbound]) -> None:
        self.messages += [(time.time(), message) for message in messages]
        if messages and self.lose_acks:
            self.lose_acks -= 1
            raise KafkaTimeoutError()

    async def event_ids_since(self, since_epoch_s: float) -> set[str]:
        return {event_id_of(m) for at, m in self.messages if at >= since_epoch_s}

    def event_ids(self) -> list[str]:
        return [event_id_of(message) for _, message in self.messages]


def runtime(records: InMemoryRecords, topic: Topic) -> Runtime:
    return Runtime(stores=InMemoryStores(records=records),
                   embedder=WordCounter(),  # type: ignore[arg-type]
                   metrics=Metrics(), producer=topic, announcements=topic, max_event_bytes=1024,
                   retry_policy=FAST)


def change(n: int) -> RecordChange:
    record = Record(
        record_id=f"mem_{n}", namespace="ns", record_kind="memory", text=f"memory {n}",
        provenance=Provenance(source_event_id=f"e{n}", source_topic="memory.events",
                              source_partition=0, source_offset=n, producer="tests"),
        created_at=datetime(2026, 11, 1, tzinfo=UTC))
    message = InboundMessage("memory.events", 0, n, b"ns", b"{}")
    return RecordChange(record, "created", 1, np.ones(384, dtype=np.float32), (message,))


async def test_new_records_are_stored_indexed_announced_and_marked() -> None:
    records, index, topic = InMemoryRecords(), Index(), Topic()
    live = runtime(records, topic)
    result = await RecordSink(live, index).store_new([change(n) for n in range(3)],
                                                     live.attempts("memory.events"))
    assert [c.record_id for c in result.done] == ["mem_0", "mem_1", "mem_2"]
    assert result.failed == []
    assert set(records.records) == set(index.points) == records.announced == {
        "mem_0", "mem_1", "mem_2"}
    assert len(topic.event_ids()) == len(set(topic.event_ids())) == 3


class CountsSeen(Index):
    """An index that notes which of its points arrived with their text's tokens kept."""

    def __init__(self, records: InMemoryRecords) -> None:
        super().__init__()
        self.records = records
        self.counted_first: set[str] = set()

    async def upsert(self, points: Sequence[IndexPoint]) -> None:
        self.counted_first |= {point.record_id for point in points
                               if point.record_id in self.records.text_tokens}
        await super().upsert(points)


async def test_a_records_tokens_are_kept_before_it_is_indexed_and_not_for_one_leaving(
) -> None:
    records, topic = InMemoryRecords(), Topic()
    index = CountsSeen(records)
    live = runtime(records, topic)
    sink = RecordSink(live, index)
    await sink.store_new([change(0), replace(change(1), record=change(1).record.model_copy(
        update={"text": "a memory of five words"}))], live.attempts("memory.events"))
    assert records.text_tokens == {"mem_0": 2, "mem_1": 5}
    assert index.counted_first == {"mem_0", "mem_1"}, "priced before it is searchable"

    records.text_tokens.clear()
    gone = RecordChange(change(0).record, "superseded", 2, None,
                        maybe_announced_since=datetime.now(UTC) - timedelta(seconds=1))
    await sink.publish([gone], live.attempts("memory.consolidate"))
    assert records.text_tokens == {}, "a record leaving the index is not priced"


async def test_a_record_the_index_refuses_is_set_apart_and_the_others_go_on() -> None:
    records, index, topic = InMemoryRecords(), Index(refuse=frozenset({"mem_1"})), Topic()
    live = runtime(records, topic)
    result = await RecordSink(live, index).store_new([change(n) for n in range(4)],
                                                     live.attempts("memory.events"))
    assert [(c.record_id, e.rejection.reason) for c, e in result.failed] == [
        ("mem_1", "refused_by_index")]
    assert result.failed[0][0].sources[0].offset == 1, "its event is the one to dead-letter"
    assert set(index.points) == records.announced == {"mem_0", "mem_2", "mem_3"}
    assert "mem_1" in records.records, "stored, unannounced: a replay finishes it"


async def test_a_lost_acknowledgement_does_not_announce_twice() -> None:
    records, index, topic = InMemoryRecords(), Index(), Topic(lose_acks=1)
    live = runtime(records, topic)
    result = await RecordSink(live, index).store_new([change(n) for n in range(3)],
                                                     live.attempts("memory.events"))
    assert len(result.done) == 3
    assert sorted(topic.event_ids()) == sorted(set(topic.event_ids())), "no duplicates"
    assert len(topic.event_ids()) == 3


async def test_a_replay_after_a_crash_between_announce_and_mark_announces_nothing_again(
) -> None:
    records, index, topic = InMemoryRecords(), Index(), Topic()
    live = runtime(records, topic)
    sink = RecordSink(live, index)
    first = [change(n) for n in range(3)]
    # The crash: stored and announced, but the worker died before marking them announced.
    await sink.store_new(first, live.attempts("memory.events"))
    records.announced.clear()
    # Its replay (a new worker, the same events, one more after them).
    await sink.store_new([*first, change(3)], live.attempts("memory.events"))
    assert len(topic.event_ids()) == len(set(topic.event_ids())) == 4
    assert records.announced == {"mem_0", "mem_1", "mem_2", "mem_3"}


async def test_a_change_without_a_vector_leaves_the_index() -> None:
    records, index, topic = InMemoryRecords(), Index(), Topic()
    live = runtime(records, topic)
    sink = RecordSink(live, index)
    await sink.store_new([change(0)], live.attempts("memory.events"))
    gone = RecordChange(change(0).record, "superseded", 2, None,
                        maybe_announced_since=datetime.now(UTC) - timedelta(seconds=1))
    result = await sink.publish([gone], live.attempts("memory.consolidate"))
    assert [c.change for c in result.done] == ["superseded"]
    assert index.points == {}
    assert len(topic.event_ids()) == 2


def refusal(n: int) -> RecordChange:
    return replace(change(n), change="refused", version=0, vector=None, reason="filler")


async def test_a_refused_write_is_recorded_and_announced_with_its_reason_not_stored() -> None:
    records, index, topic = InMemoryRecords(), Index(), Topic(lose_acks=1)
    live = runtime(records, topic)
    result = await RecordSink(live, index).store_refused([refusal(0), refusal(1)],
                                                         live.attempts("memory.events"))
    assert [c.record_id for c in result.done] == ["mem_0", "mem_1"]
    assert records.records == {} and index.points == {} and records.announced == set()
    assert {k: reason for k, (reason, _) in records.refused.items()} == {
        "mem_0": "filler", "mem_1": "filler"}
    assert records.refusals_announced == {"mem_0", "mem_1"}
    # The lost acknowledgement was retried, and read back: each refusal announced once.
    bodies = [json.loads(message.value) for _, message in topic.messages]
    assert sorted((b["record_id"], b["change"], b["version"], b["reason"]) for b in bodies) == [
        ("mem_0", "refused", 0, "filler"), ("mem_1", "refused", 0, "filler")]


async def test_a_refusal_replayed_after_a_crash_before_its_mark_is_not_announced_again(
) -> None:
    records, index, topic = InMemoryRecords(), Index(), Topic()
    live = runtime(records, topic)
    sink = RecordSink(live, index)
    await sink.store_refused([refusal(0)], live.attempts("memory.events"))
    records.refusals_announced.clear()
    await sink.store_refused([refusal(0), refusal(1)], live.attempts("memory.events"))
    assert len(topic.event_ids()) == len(set(topic.event_ids())) == 2
    assert records.refusals_announced == {"mem_0", "mem_1"}
