"""Load for crash tests and soaks: memory writes published at a steady rate by a producer that
outlives broker restarts, and the exactly-once count of what came out.

A send that is not acknowledged (the broker died under it) is sent again, with the same
event_id: the topic may then hold an event twice, which the worker must store once.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime

import asyncpg
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from harness.kafka_io import Received
from memstream_client.ids import memory_record_id
from publisher.kafka_security import PLAINTEXT, KafkaSecurity
from schemas.topics import MEMORY_EVENTS


@dataclass(frozen=True)
class Write:
    namespace: str
    event_id: str
    value: bytes

    @property
    def record_id(self) -> str:
        return memory_record_id(self.namespace, self.event_id)


def memory_writes(total: int, namespaces: int, tag: str = "") -> list[Write]:
    """`total` writes spread over `namespaces` namespaces; every text distinct (numbers no
    other text has), so that nothing is a duplicate of anything."""
    prefix = tag or uuid.uuid4().hex[:8]
    writes = []
    for n in range(total):
        namespace = f"load-{prefix}-{n % namespaces}"
        event_id = f"{prefix}-{n}"
        value = json.dumps({
            "event_id": event_id, "type": "memory.write", "namespace": namespace,
            "occurred_at": datetime.now(UTC).isoformat(), "producer": "load",
            "payload": {"text": f"Observation {n} of run {prefix}: job {n + 70000} took "
                                f"{n + 90000} ms on host {n % 97}."},
        }).encode()
        writes.append(Write(namespace, event_id, value))
    return writes


@dataclass(frozen=True)
class Change:
    """A lifecycle event of the load, and the change it must be announced as."""

    namespace: str
    event_id: str
    value: bytes
    record_id: str
    change: str


def with_lifecycle(writes: list[Write], every: int) -> tuple[list[Write | Change], list[Change]]:
    """The writes with, after every `every`th, an update proposed to it (a pending diff: the
    memory is approved) and its deprecation; and those changes."""
    events: list[Write | Change] = []
    changes: list[Change] = []
    for n, write in enumerate(writes):
        events.append(write)
        if n % every:
            continue
        for event_type, change, payload in (
            ("memory.update", "proposed", {"expected_version": 1, "tags": ["load"]}),
            ("memory.deprecate", "deprecated", {"reason": "load"}),
        ):
            event_id = f"{write.event_id}-{change}"
            value = json.dumps({
                "event_id": event_id, "type": event_type, "namespace": write.namespace,
                "occurred_at": datetime.now(UTC).isoformat(), "producer": "load",
                "payload": {"record_id": write.record_id, **payload},
            }).encode()
            changes.append(Change(write.namespace, event_id, value, write.record_id, change))
        events.extend(changes[-2:])
    return events, changes


async def lifecycle_exactly_once(pg_dsn: str, changes: list[Change],
                                 announced: list[Received]) -> dict[str, int]:
    """What went wrong with the lifecycle events of a load; all zeros when each was applied,
    versioned and announced once."""
    connection = await asyncpg.connect(pg_dsn)
    try:
        applied = Counter(r["event_id"] for r in await connection.fetch(
            "SELECT event_id FROM lifecycle_events WHERE event_id = ANY($1::text[])",
            [c.event_id for c in changes]))
        versions = {r["record_id"]: (r["n"], r["last"]) for r in await connection.fetch(
            "SELECT record_id, count(*) AS n, max(version) AS last FROM record_versions"
            " WHERE record_id = ANY($1::text[]) GROUP BY record_id",
            [c.record_id for c in changes])}
        diffs = await connection.fetchval(
            "SELECT count(*) FROM pending_diffs WHERE diff_id = ANY($1::text[])",
            [c.event_id for c in changes if c.change == "proposed"])
    finally:
        await connection.close()
    causes = Counter(body.get("cause_event_id") for body in map(json.loads,
                                                              (m.value for m in announced)))
    return {
        "not_applied_once": sum(applied[c.event_id] != 1 for c in changes),
        "not_announced_once": sum(causes[c.event_id] != 1 for c in changes),
        "records_not_at_version_2": sum(versions.get(c.record_id) != (2, 2) for c in changes),
        "pending_diffs_missing": len([c for c in changes if c.change == "proposed"]) - diffs,
    }


@dataclass
class Publishing:
    """Publishes writes at `rate` per second until all are acknowledged."""

    bootstrap: str
    writes: list[Write]
    rate: float
    security: KafkaSecurity = PLAINTEXT
    acked: set[str] = field(default_factory=set)
    resent: int = 0

    async def run(self) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all",
                                    enable_idempotence=True, linger_ms=5,
                                    request_timeout_ms=15000, retry_backoff_ms=200,
                                    **self.security.client_options())
        await _start(producer)
        started = time.monotonic()
        try:
            pending: list[tuple[Write, asyncio.Future[object]]] = []
            for n, write in enumerate(self.writes):
                await asyncio.sleep(max(0.0, started + n / self.rate - time.monotonic()))
                pending.append((write, await self._send(producer, write)))
                pending = await self._settle(producer, pending, wait=False)
            while pending:
                pending = await self._settle(producer, pending, wait=True)
        finally:
            await producer.stop()

    async def _send(self, producer: AIOKafkaProducer, write: Write) -> asyncio.Future[object]:
        while True:
            try:
                future: asyncio.Future[object] = await producer.send(
                    MEMORY_EVENTS, write.value, key=write.namespace.encode())
                return future
            except KafkaError:
                await asyncio.sleep(0.5)

    async def _settle(self, producer: AIOKafkaProducer,
                      pending: list[tuple[Write, asyncio.Future[object]]],
                      wait: bool) -> list[tuple[Write, asyncio.Future[object]]]:
        """Count the acknowledged sends, send the failed ones again; return the rest."""
        if wait:
            await asyncio.wait([future for _, future in pending],
                               return_when=asyncio.FIRST_COMPLETED)
        still = []
        for write, future in pending:
            if not future.done():
                still.append((write, future))
            elif future.exception() is None:
                self.acked.add(write.event_id)
            else:
                self.resent += 1
                still.append((write, await self._send(producer, write)))
        return still


async def _start(producer: AIOKafkaProducer) -> None:
    while True:
        try:
            await producer.start()
            return
        except KafkaError:
            await asyncio.sleep(0.5)


@dataclass(frozen=True)
class ExactlyOnce:
    """What the stores and memory.updated hold of a load: each must be its writes, once."""

    writes: int
    records: int
    distinct_records: int
    index_points: int
    announcements: int
    distinct_announcements: int
    missing: list[str]

    @property
    def lost(self) -> int:
        return len(self.missing)

    @property
    def duplicated(self) -> int:
        return (self.records - self.distinct_records) + (
            self.announcements - self.distinct_announcements)

    def holds(self) -> bool:
        return (self.lost == 0 and self.duplicated == 0
                and self.records == self.index_points == self.distinct_announcements
                == self.writes)


async def pg_index_points(pg_dsn: str, namespaces: set[str]) -> int:
    """Points of these namespaces in the pgvector index (`pg://`) of the records' Postgres."""
    connection = await asyncpg.connect(pg_dsn)
    try:
        count: int = await connection.fetchval(
            "SELECT count(*) FROM vector_index_memstream WHERE namespace = ANY($1::text[])",
            sorted(namespaces))
        return count
    finally:
        await connection.close()


async def exactly_once(pg_dsn: str, index_points: int, writes: list[Write],
                       announced: list[Received]) -> ExactlyOnce:
    namespaces = sorted({write.namespace for write in writes})
    connection = await asyncpg.connect(pg_dsn)
    try:
        row = await connection.fetchrow(
            "SELECT count(*) AS n, count(DISTINCT source_event_id) AS distinct_n FROM records"
            " WHERE namespace = ANY($1::text[]) AND record_kind = 'memory'", namespaces)
        stored = {r["record_id"] for r in await connection.fetch(
            "SELECT record_id FROM records WHERE namespace = ANY($1::text[])", namespaces)}
    finally:
        await connection.close()
    assert row is not None
    ours = {write.record_id for write in writes}
    created = Counter(
        body["event_id"] for body in (json.loads(m.value) for m in announced)
        if body["record_id"] in ours and body["change"] == "created")
    return ExactlyOnce(
        writes=len(writes), records=int(row["n"]), distinct_records=int(row["distinct_n"]),
        index_points=index_points, announcements=sum(created.values()),
        distinct_announcements=len(created),
        missing=sorted(ours - stored))
