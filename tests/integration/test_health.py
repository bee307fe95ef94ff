"""Stalls are visible: a partition that has lag and makes no progress, and an agent whose
stages crash, turn /healthz to 503 naming them, set their metrics, and the worker recovers
by itself once the cause is gone. Failures are injected into a real worker
(tests/integration/faulty_worker.py) on a stack of this module's own."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from harness.kafka_io import TopicReader, produce
from harness.stack import Stack, Worker
from memstream_client.ids import memory_record_id
from streams.plumbing.config import REPO_ROOT
from tests.integration.conftest import event, updated_ids

pytestmark = pytest.mark.integration

T = TypeVar("T")


@pytest.fixture(scope="module")
def own_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with Stack(tmp_path_factory.mktemp("health")) as running:
        yield running


@pytest.fixture(scope="module")
def faults(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("faults")


@pytest.fixture(scope="module")
def faulty(own_stack: Stack, faults: Path) -> Iterator[Worker]:
    running = own_stack.worker(
        "faulty", module="tests.integration.faulty_worker", MEMSTREAM_FAULTS_DIR=str(faults),
        MEMSTREAM_STALL_AFTER_S="3", MEMSTREAM_LAG_INTERVAL_S="0.5",
        MEMSTREAM_SESSION_TIMEOUT_S="6")
    running.start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
async def announced(own_stack: Stack) -> AsyncIterator[TopicReader]:
    async with TopicReader(own_stack.broker.bootstrap, "memory.updated") as reader:
        yield reader


@pytest.fixture(scope="module")
async def dead(own_stack: Stack) -> AsyncIterator[TopicReader]:
    async with TopicReader(own_stack.broker.bootstrap, "memory.events.dlq") as reader:
        yield reader


async def eventually(check: Callable[[], Awaitable[T | None]], what: str,
                     timeout_s: float = 60.0) -> T:
    deadline = time.monotonic() + timeout_s
    while (found := await check()) is None:
        assert time.monotonic() < deadline, f"{what}: not after {timeout_s}s"
        await asyncio.sleep(0.1)
    return found


async def health(worker: Worker) -> tuple[int, dict[str, Any]]:
    async with httpx.AsyncClient(base_url=worker.base_url, headers=worker.headers,
                                 timeout=5) as client:
        answer = await client.get("/healthz")
        return answer.status_code, answer.json()


async def healthy(worker: Worker) -> dict[str, Any] | None:
    status, body = await health(worker)
    return body if status == 200 else None


async def metric(worker: Worker, name: str, **labels: str) -> float:
    async with httpx.AsyncClient(base_url=worker.base_url, headers=worker.headers,
                                 timeout=5) as client:
        text = (await client.get("/metrics")).text
    wanted = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(f"{name}{{{wanted}}} "):
            return float(line.split()[-1])
    raise LookupError(f"{name}{{{wanted}}} not exported")


async def write(stack: Stack, namespace: str, texts: list[str]) -> list[str]:
    events = [event("memory.write", namespace, {"text": text}) for text in texts]
    await produce(stack.broker.bootstrap, "memory.events",
                  [(namespace.encode(), value) for value in events])
    return [memory_record_id(namespace, json.loads(value)["event_id"]) for value in events]


async def test_a_partition_that_makes_no_progress_turns_healthz_503_until_it_moves(
    own_stack: Stack, faulty: Worker, faults: Path, announced: TopicReader, namespace: str,
) -> None:
    await eventually(lambda: healthy(faulty), "healthy at start")
    (faults / "index-down").touch()
    try:
        ids = await write(own_stack, namespace, [f"Stall probe {n}." for n in range(3)])

        async def stalled() -> dict[str, Any] | None:
            status, body = await health(faulty)
            return body if status == 503 and body.get("stalled") else None

        body = await eventually(stalled, "a stalled partition on /healthz", 30)
        (partition,) = body["stalled"]
        topic, number = partition.split("/")
        assert topic == "memory.events"
        assert body["status"] == "stalled" and body["postgres"] == "ok"
        assert "no progress" in body["stalled"][partition]
        assert await metric(faulty, "memstream_partition_stalled", topic=topic,
                            partition=number) == 1
        assert updated_ids(announced.messages, namespace) == [], "nothing announced unindexed"
    finally:
        (faults / "index-down").unlink()
    await announced.wait_for(lambda m: set(ids) <= set(updated_ids(m, namespace)), 60)
    await eventually(lambda: healthy(faulty), "healthy again", 30)
    assert await metric(faulty, "memstream_partition_stalled", topic=topic,
                        partition=number) == 0


async def test_an_agent_whose_stages_crash_is_reported_then_recovers_by_itself(
    own_stack: Stack, faulty: Worker, faults: Path, announced: TopicReader, dead: TopicReader,
    namespace: str,
) -> None:
    await eventually(lambda: healthy(faulty), "healthy at start")
    before = await metric(faulty, "memstream_agent_crashes_total", agent="memory-writes")
    (faults / "crash-memory-writes").touch()
    try:
        crashed_ids = await write(own_stack, namespace, [
            "Crash probe: the deploy queue holds 7 jobs.",
            "Crash probe: the cache holds 9 entries."])

        async def agent_down() -> dict[str, Any] | None:
            status, body = await health(faulty)
            return body if status == 503 and "memory-writes" in body.get("agents", {}) else None

        body = await eventually(agent_down, "a crashed agent on /healthz", 30)
        assert "injected: the memory writer's stage is broken" in body["agents"]["memory-writes"]
        # A batch that crashes every try is dead-lettered, replayable once the bug is fixed.
        letters = await dead.wait_for(lambda m: len([x for x in m if x.key == namespace.encode()
                                                     ]) == 2, 30)
        ours = [m for m in letters if m.key == namespace.encode()]
        assert {m.headers["dlq.reason"] for m in ours} == {b"internal_error"}
        assert all(b"RuntimeError: injected" in m.headers["dlq.error"] for m in ours)
    finally:
        (faults / "crash-memory-writes").unlink()
    assert await metric(faulty, "memstream_agent_crashes_total",
                        agent="memory-writes") > before
    # Restarted, the agent consumes again.
    (after,) = await write(own_stack, namespace, ["After the crash."])
    await announced.wait_for(lambda m: after in updated_ids(m, namespace), 30)
    assert not set(crashed_ids) & set(updated_ids(announced.messages, namespace))
    await eventually(lambda: healthy(faulty), "healthy again", 30)
    assert await metric(faulty, "memstream_agent_up", agent="memory-writes") == 1

    # The bug is fixed: the redrive stores what the crashes dead-lettered.
    replay = subprocess.run(
        [sys.executable, "-m", "streams.commands.replay_dead_letters",
         "--topic", "memory.events.dlq", "--reason", "internal_error",
         "--bootstrap", own_stack.broker.bootstrap],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert replay.returncode == 0, replay.stderr
    await announced.wait_for(lambda m: set(crashed_ids) <= set(updated_ids(m, namespace)), 30)
