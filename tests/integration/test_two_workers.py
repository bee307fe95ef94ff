"""Two worker processes in one consumer group, sharing one index, one of them killed with
SIGKILL mid-stream and restarted: every event (writes, and lifecycle events among them) is
exactly once in Postgres, the index and memory.updated.

The shared index is pgvector in the records' own Postgres (`pg://`): the embedded edge engine
admits one process, and no Qdrant server can be installed here.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

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


@pytest.fixture
async def announced(pair_stack: Stack) -> AsyncIterator[TopicReader]:
    async with TopicReader(pair_stack.broker.bootstrap, "memory.updated") as reader:
        yield reader


@pytest.mark.slow
async def test_two_workers_one_killed_mid_stream_store_every_event_exactly_once(
    pair_stack: Stack, worker_pair: tuple[Worker, Worker], announced: TopicReader,
) -> None:
    first, second = worker_pair
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

    await produce(pair_stack.broker.bootstrap, "memory.events",
                  [(event.namespace.encode(), event.value) for event in events])
    await announced.wait_for(lambda m: created() >= TOTAL // 3, 180)
    second.kill()
    assert created() < TOTAL, "the kill must land mid-stream"
    second.start()
    await announced.wait_for(lambda m: created() == TOTAL and changed() == len(causes), 300)
    await wait_caught_up(pair_stack.broker.bootstrap, first.app_id, ["memory.events"])
    await asyncio.sleep(2)  # anything announced twice would have arrived by now

    counted = await exactly_once(
        pair_stack.pg_dsn, await pg_index_points(pair_stack.pg_dsn,
                                           {write.namespace for write in writes}),
        writes, announced.messages)
    assert counted.holds(), counted
    assert await lifecycle_exactly_once(pair_stack.pg_dsn, changes, announced.messages) == {
        "not_applied_once": 0, "not_announced_once": 0, "records_not_at_version_2": 0,
        "pending_diffs_missing": 0}
