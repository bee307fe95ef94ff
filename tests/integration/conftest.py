"""The real stack for the pipeline tests: one broker, one Postgres and one worker for the
session, all started here and stopped at the end (CI starts with nothing running)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.kafka_io import TopicReader
from harness.stack import Stack, Worker
from tests.answers_check import AnswerLog, DeclaredAnswers
from tests.wired_app import wired_ingest


@pytest.fixture(scope="session")
def declared_answers() -> Iterator[AnswerLog]:
    """Every success answer the integration tests receive over HTTP, held against the schema
    its route declares (tests/answers_check.py): an answer that drifts from its declaration
    fails the run, at its end, with every drift it found."""
    _, document = wired_ingest()
    log = AnswerLog(DeclaredAnswers(document))
    yield log
    print("\n" + log.summary())
    if log.problems:
        pytest.fail("answers that drift from their declared schemas:\n" + "\n".join(
            dict.fromkeys(log.problems)), pytrace=False)


@pytest.fixture(autouse=True)
def answers_checked(declared_answers: AnswerLog) -> Iterator[None]:
    """The answers of each integration test, and of the fixtures it starts, are captured;
    a unit test's fakes are not."""
    with declared_answers.capturing():
        yield


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with Stack(tmp_path_factory.mktemp("stack")) as running:
        yield running


# The repositories whose planning the session's worker reads (docs/planning.md): each a
# checkout under the stack's folder that a test fills (tests/integration/test_planning.py,
# test_browser.py).
PLANNING_REPOS = ("beads-fixture", "no-file", "corrupt", "beads-browser")


def planning_checkout(stack: Stack, repo: str) -> Path:
    return stack.root / "planning" / repo


@pytest.fixture(scope="session")
def worker(stack: Stack) -> Iterator[Worker]:
    """The ingest worker, with its consolidator process beside it (as `make run` has).

    Write-time twins off: the tests of consolidation, history and the browser write
    restatements on purpose and need each stored as it comes. Twins at their default are
    tested on a stack of their own (test_twins.py)."""
    running = stack.worker(MEMSTREAM_TWIN_COSINE="off",
                           MEMSTREAM_SESSION_TIMEOUT_S="6", MEMSTREAM_RETENTION_INTERVAL_S="1",
                           MEMSTREAM_GAP_INTERVAL_S="1", MEMORY_PLANNING="beads",
                           MEMSTREAM_PLANNING_REPOS=",".join(
                               f"{repo}={planning_checkout(stack, repo)}"
                               for repo in PLANNING_REPOS))
    running.start()
    consolidator = stack.consolidator(running)
    consolidator.start()
    yield running
    consolidator.stop()
    running.stop()


@pytest.fixture(scope="session")
def pair_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A stack of its own for two workers sharing one index: the pgvector index in the
    records' Postgres (the embedded engine admits one process). Started once for the tests
    that need two workers."""
    with Stack(tmp_path_factory.mktemp("two-workers")) as running:
        yield running


@pytest.fixture(scope="session")
def worker_pair(pair_stack: Stack) -> Iterator[tuple[Worker, Worker]]:
    """Two worker processes in one consumer group on `pair_stack`."""
    group = f"memstream-{uuid.uuid4().hex[:8]}"
    pair = tuple(pair_stack.worker(name, index_url="pg://", app_id=group,
                                   MEMSTREAM_SESSION_TIMEOUT_S="6") for name in ("a", "b"))
    for running in pair:
        running.start()
    yield pair[0], pair[1]
    for running in pair:
        running.stop()


@pytest.fixture(scope="session")
def consolidator(stack: Stack, worker: Worker) -> Worker:
    (process,) = [w for w in stack.workers if w.role == "consolidator" and
                  w.app_id == worker.app_id]
    return process


@pytest.fixture(scope="session")
async def updates(stack: Stack) -> AsyncIterator[TopicReader]:
    async with TopicReader(stack.broker.bootstrap, "memory.updated") as reader:
        yield reader


@pytest.fixture(scope="session")
async def memory_dlq(stack: Stack) -> AsyncIterator[TopicReader]:
    async with TopicReader(stack.broker.bootstrap, "memory.events.dlq") as reader:
        yield reader


@pytest.fixture(scope="session")
async def runs_dlq(stack: Stack) -> AsyncIterator[TopicReader]:
    async with TopicReader(stack.broker.bootstrap, "runs.events.dlq") as reader:
        yield reader


@pytest.fixture
async def http(worker: Worker) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=worker.base_url, headers=worker.headers,
                                 timeout=10) as client:
        yield client


@pytest.fixture
def namespace() -> str:
    return f"ns-{uuid.uuid4().hex[:10]}"


def event(event_type: str, namespace: str, payload: dict[str, Any],
          event_id: str | None = None) -> bytes:
    return json.dumps({
        "event_id": event_id or uuid.uuid4().hex,
        "type": event_type,
        "namespace": namespace,
        "occurred_at": datetime.now(UTC).isoformat(),
        "producer": "tests",
        "payload": payload,
    }).encode()


def updated_ids(messages: list[Any], namespace: str) -> list[str]:
    """record ids announced on memory.updated for `namespace`, in arrival order."""
    ids = []
    for message in messages:
        body = json.loads(message.value)
        if body["namespace"] == namespace:
            ids.append(body["record_id"])
    return ids


def tmp_file(directory: Path, name: str, lines: list[bytes]) -> Path:
    path = directory / name
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


# Twins on, at their default: a stack of its own per module that asks for it, with a worker of
# the default settings (the session's worker turns twins off, `worker` above).
@pytest.fixture(scope="module")
def twin_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with Stack(tmp_path_factory.mktemp("twins")) as running:
        yield running


@pytest.fixture(scope="module")
def twin_worker(twin_stack: Stack) -> Iterator[Worker]:
    running = twin_stack.worker(MEMSTREAM_SESSION_TIMEOUT_S="6")
    running.start()
    yield running
    running.stop()
