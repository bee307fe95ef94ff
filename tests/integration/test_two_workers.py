"""Two worker processes in one consumer group, sharing one index, one of them killed with
SIGKILL mid-stream and restarted: every event (writes, and lifecycle events among them) is
exactly once in Postgres, the index and memory.updated.

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
from harness.load import (
    exactly_once,
    lifecycle_exactly_once,
    memory_writes,
    pg_index_points,
    with_lifecycle,
)
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
    # Lifecycle events in the mix: a proposal and a deprecation after every 25th write.
    events, changes = with_lifecycle(writes, 25)
    record_ids = {write.record_id for write in writes}
    causes = {change.event_id for change in changes}

    def created() -> int:
        return len({json.loads(m.value)["record_id"] for m in announced.messages} & record_ids)

    def changed() -> int:
        return len({json.loads(m.value).get("cause_event_id") for m in announced.messages}
                   & causes)

    await produce(shared_stack.broker.bootstrap, "memory.events",
                  [(event.namespace.encode(), event.value) for event in events])
    await announced.wait_for(lambda m: created() >= TOTAL // 3, 180)
    second.kill()
    assert created() < TOTAL, "the kill must land mid-stream"
    second.start()
    await announced.wait_for(lambda m: created() == TOTAL and changed() == len(causes), 300)
    await wait_caught_up(shared_stack.broker.bootstrap, first.app_id, ["memory.events"])
    await asyncio.sleep(2)  # anything announced twice would have arrived by now

    counted = await exactly_once(
        shared_stack.pg_dsn, await pg_index_points(shared_stack.pg_dsn,
                                           {write.namespace for write in writes}),
        writes, announced.messages)
    assert counted.holds(), counted
    assert await lifecycle_exactly_once(shared_stack.pg_dsn, changes, announced.messages) == {
        "not_applied_once": 0, "not_announced_once": 0, "records_not_at_version_2": 0,
        "pending_diffs_missing": 0}
