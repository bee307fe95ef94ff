"""The report relay (streams/stages/consolidation/report_relay.py) on in-memory stores: a
consolidation the consolidator wrote is indexed, announced and marked announced by one worker at
a time."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np

from memstream_client.events import Provenance
from schemas.records import Record
from stores.consolidations import MaintenanceReport
from stores.index.protocol import IndexPoint
from streams.plumbing.failures import RetryPolicy
from streams.plumbing.messages import Outbound
from streams.plumbing.metrics import Metrics
from streams.plumbing.runtime import Runtime
from streams.stages.announcements import event_id_of
from streams.stages.consolidation.report_relay import ReportRelay
from streams.stages.record_sink import RecordSink
from tests.unit.store_fakes import InMemoryStores, WordCounter

FAST = RetryPolicy(first_delay_s=0.001, max_delay_s=0.002, unexpected_attempts=2)
NOW = datetime(2026, 11, 1, tzinfo=UTC)


class Index:
    def __init__(self, record_ids: Sequence[str] = ()) -> None:
        self.points = set(record_ids)

    async def upsert(self, points: Sequence[IndexPoint]) -> None:
        self.points.update(point.record_id for point in points)

    async def delete(self, record_ids: Sequence[str]) -> None:
        self.points.difference_update(record_ids)


class Topic:
    def __init__(self) -> None:
        self.messages: list[tuple[float, Outbound]] = []

    async def produce(self, messages: Sequence[Outbound]) -> None:
        self.messages += [(time.time(), message) for message in messages]

    async def event_ids_since(self, since_epoch_s: float) -> set[str]:
        return {event_id_of(m) for at, m in self.messages if at >= since_epoch_s}

    def announced(self) -> list[tuple[str, str, int, str]]:
        bodies = [json.loads(message.value) for _, message in self.messages]
        return sorted((b["record_id"], b["change"], b["version"],
                       b["provenance"]["source_event_id"]) for b in bodies)


def memory(record_id: str, event_id: str) -> Record:
    return Record(record_id=record_id, namespace="ns", record_kind="memory",
                  text=f"memory {record_id}", created_at=NOW,
                  provenance=Provenance(source_event_id=event_id, source_topic="memory.events",
                                        source_partition=0, source_offset=0, producer="tests"))


async def consolidated(stores: InMemoryStores) -> None:
    """What the consolidator leaves: the merge stored, its members superseded by it."""
    vector = np.ones(4, dtype=np.float32)
    await stores.records.insert_records([(memory("m1", "e1"), vector),
                                         (memory("m2", "e2"), vector),
                                         (memory("merged", "cns_1"), vector)])
    for member in ("m1", "m2"):
        stores.records.versions[member] = 2
        stores.records.superseded_by[member] = "merged"
    stores.consolidations.stored_reports["cns_1"] = MaintenanceReport(
        report_id="cns_1", namespace="ns", reason="manual", started_at=NOW, finished_at=NOW,
        memories=2, clusters=[{"new_id": "merged", "members": ["m1", "m2"]}],
        merged_ids=["m1", "m2"], new_ids=["merged"], timings={"store": 0.1}, announced_at=None)


def relay(stores: InMemoryStores, index: Index, topic: Topic) -> ReportRelay:
    runtime = Runtime(stores=stores, embedder=WordCounter(),  # type: ignore[arg-type]
                      metrics=Metrics(), producer=topic, announcements=topic,
                      max_event_bytes=1024, retry_policy=FAST)
    return ReportRelay(runtime, RecordSink(runtime, index))


async def test_a_report_is_indexed_announced_and_marked_once() -> None:
    stores, index, topic = InMemoryStores(), Index(["m1", "m2"]), Topic()
    await consolidated(stores)
    assert await relay(stores, index, topic).publish_pending() == 1
    assert index.points == {"merged"}, "the merge searchable, its members out of the index"
    # Members are announced with the provenance of the request that superseded them.
    assert topic.announced() == [("m1", "superseded", 2, "cns_1"),
                                 ("m2", "superseded", 2, "cns_1"),
                                 ("merged", "merged", 1, "cns_1")]
    report = stores.consolidations.stored_reports["cns_1"]
    assert report.announced_at is not None and set(report.timings) == {"store", "publish"}
    assert await relay(stores, index, topic).publish_pending() == 0
    assert len(topic.messages) == 3


async def test_a_report_another_worker_holds_waits_for_its_lease() -> None:
    stores, index, topic = InMemoryStores(), Index(), Topic()
    await consolidated(stores)
    stores.consolidations.leased_until["cns_1"] = datetime.now(UTC) + timedelta(seconds=30)
    assert await relay(stores, index, topic).publish_pending() == 0
    assert topic.messages == [] and index.points == set()
    assert stores.consolidations.stored_reports["cns_1"].announced_at is None


async def test_a_worker_taking_over_a_lapsed_lease_announces_nothing_twice() -> None:
    stores, index, topic = InMemoryStores(), Index(), Topic()
    await consolidated(stores)
    first = relay(stores, index, topic)
    # The first worker published, then died before marking the report announced.
    assert await first.publish_pending() == 1
    stores.consolidations.stored_reports["cns_1"] = MaintenanceReport(
        **{**vars(stores.consolidations.stored_reports["cns_1"]), "announced_at": None})
    stores.consolidations.leased_until["cns_1"] = datetime.now(UTC) - timedelta(seconds=1)
    assert await relay(stores, index, topic).publish_pending() == 1
    assert len(topic.messages) == 3, "read back from the first try: no duplicates"
