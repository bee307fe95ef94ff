"""Crashes, not clean stops: the broker and a durable Postgres are killed with SIGKILL mid-stream
while a producer keeps publishing, and restarted on the same data and address. Every event
ends up exactly once in Postgres, in the index and on memory.updated."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from harness.kafka_io import TopicReader
from harness.load import ExactlyOnce, Publishing, exactly_once, memory_writes
from harness.stack import Stack, Worker, crash_postgres

pytestmark = pytest.mark.integration

TOTAL = 1500
NAMESPACES = 10
RATE = 150.0  # events/s: ten seconds of load, well under what one worker takes


@pytest.fixture(scope="module")
def durable_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with Stack(tmp_path_factory.mktemp("crashes"), durable=True) as running:
        yield running


@pytest.fixture(scope="module")
def crash_worker(durable_stack: Stack) -> Iterator[Worker]:
    running = durable_stack.worker(MEMSTREAM_SESSION_TIMEOUT_S="6")
    running.start()
    yield running
    running.stop()


@pytest.fixture
async def announced(durable_stack: Stack) -> AsyncIterator[TopicReader]:
    async with TopicReader(durable_stack.broker.bootstrap, "memory.updated") as reader:
        yield reader


async def index_points(worker: Worker, namespaces: set[str]) -> int:
    async with httpx.AsyncClient(base_url=worker.base_url, headers=worker.headers,
                                 timeout=10) as client:
        counts = [(await client.get("/v1/stats", params={"namespace": ns})).json()
                  for ns in sorted(namespaces)]
    return sum(int(count["index_points"]) for count in counts)


def created(announced: TopicReader, record_ids: set[str]) -> int:
    return len({json.loads(m.value)["record_id"] for m in announced.messages} & record_ids)


async def load_with_a_crash(stack: Stack, worker: Worker, announced: TopicReader, tag: str,
                            crash: str) -> ExactlyOnce:
    writes = memory_writes(TOTAL, NAMESPACES, tag)
    record_ids = {write.record_id for write in writes}
    publishing = Publishing(stack.broker.bootstrap, writes, RATE)
    producer = asyncio.create_task(publishing.run())
    await announced.wait_for(lambda m: created(announced, record_ids) >= TOTAL // 3, 120)
    if crash == "broker":
        stack.broker.kill()
        await asyncio.sleep(2)
        stack.broker.start()
    else:
        crash_postgres(stack.postgres)
        await asyncio.sleep(2)
        stack.postgres.start()
    await producer
    assert len(publishing.acked) == TOTAL
    await announced.wait_for(lambda m: created(announced, record_ids) == TOTAL, 180)
    await asyncio.sleep(2)  # anything announced twice would have arrived by now
    namespaces = {write.namespace for write in writes}
    return await exactly_once(stack.pg_dsn, await index_points(worker, namespaces), writes,
                              announced.messages)


@pytest.mark.slow
async def test_a_broker_killed_mid_stream_loses_and_duplicates_nothing(
    durable_stack: Stack, crash_worker: Worker, announced: TopicReader,
) -> None:
    counted = await load_with_a_crash(durable_stack, crash_worker, announced, "broker-kill",
                                      "broker")
    assert counted.holds(), counted


async def test_a_postgres_killed_mid_stream_loses_and_duplicates_nothing(
    durable_stack: Stack, crash_worker: Worker, announced: TopicReader,
) -> None:
    counted = await load_with_a_crash(durable_stack, crash_worker, announced, "postgres-kill",
                                      "postgres")
    assert counted.holds(), counted
