"""Two worker processes in one consumer group, sharing one index, one of them killed with
SIGKILL mid-stream and restarted: every event is exactly once in Postgres, the index and
memory.updated.

The shared index is pgvector in the records' own Postgres (`pg://`): the embedded edge engine
admits one process, and no Qdrant server can be installed here.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from harness.kafka_io import TopicReader, produce, wait_caught_up
from harness.load import exactly_once, memory_writes, pg_index_points
from harness.stack import Stack, Worker

pytestmark = pytest.mark.integration

TOTAL = 5000
NAMESPACES = 20


@pytest.fixture(scope="module")
def shared_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with Stack(tmp_path_factory.mktemp("two-workers")) as running:
        yield running


@pytest.fixture(scope="module")
def workers(shared_stack: Stack) -> Iterator[tuple[Worker, Worker]]:
    group = f"memstream-{uuid.uuid4().hex[:8]}"
    pair = tuple(shared_stack.worker(name, index_url="pg://", app_id=group,
                                     MEMSTREAM_SESSION_TIMEOUT_S="6") for name in ("a", "b"))
    for worker in pair:
        worker.start()
    yield pair[0], pair[1]
    for worker in pair:
        worker.stop()


@pytest.fixture
async def announced(shared_stack: Stack) -> AsyncIterator[TopicReader]:
    async with TopicReader(shared_stack.broker.bootstrap, "memory.updated") as reader:
        yield reader


async def test_two_workers_one_killed_mid_stream_store_every_event_exactly_once(
    shared_stack: Stack, workers: tuple[Worker, Worker], announced: TopicReader,
) -> None:
    first, second = workers
    writes = memory_writes(TOTAL, NAMESPACES, "two-workers")
    record_ids = {write.record_id for write in writes}

    def created() -> int:
        return len({json.loads(m.value)["record_id"] for m in announced.messages} & record_ids)

    await produce(shared_stack.broker.bootstrap, "memory.events",
                  [(write.namespace.encode(), write.value) for write in writes])
    await announced.wait_for(lambda m: created() >= TOTAL // 3, 180)
    second.kill()
    assert created() < TOTAL, "the kill must land mid-stream"
    second.start()
    await announced.wait_for(lambda m: created() == TOTAL, 300)
    await wait_caught_up(shared_stack.broker.bootstrap, first.app_id, ["memory.events"])
    await asyncio.sleep(2)  # anything announced twice would have arrived by now

    counted = await exactly_once(
        shared_stack.pg_dsn, await pg_index_points(shared_stack.pg_dsn,
                                           {write.namespace for write in writes}),
        writes, announced.messages)
    assert counted.holds(), counted
