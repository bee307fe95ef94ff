"""The spine end to end on real components: Kafka broker, Postgres, qdrant-edge, the ONNX
model, and the worker as its own process."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from embedder.model import Embedder
from harness.kafka_io import TopicReader, produce, wait_caught_up
from harness.stack import MODEL_DIR, Stack, Worker
from memstream_client.ids import digest_record_id, memory_record_id
from processors.recall.ranking import PROFILES
from publisher.kafka_publisher import Publisher
from stores.index.postgres_search import RecordsSearch
from stores.index.protocol import SearchScope
from stores.postgres.stores import PostgresStores
from streams.api.rendering import search_answer
from streams.plumbing.metrics import Metrics
from streams.plumbing.runtime import Runtime
from streams.reads.search import SearchQuery, search
from tests.integration.conftest import event, tmp_file, updated_ids

pytestmark = pytest.mark.integration

VPN_MEMORY = "The staging database only accepts connections over the office VPN."


async def test_a_memory_from_aiokafka_is_stored_indexed_announced_and_searchable(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient, namespace: str
) -> None:
    async with Publisher(stack.broker.bootstrap, producer="tests") as publisher:
        record_id = await publisher.write_memory(
            namespace, VPN_MEMORY, source_ref="https://wiki.example/vpn", tags=["ops"],
            memory_type="lesson",
        )
    await updates.wait_for(lambda messages: record_id in updated_ids(messages, namespace))

    connection = await asyncpg.connect(stack.pg_dsn)
    try:
        row = await connection.fetchrow(
            "SELECT text, record_kind, memory_type, source_ref FROM records"
            " WHERE record_id = $1", record_id)
    finally:
        await connection.close()
    assert row is not None
    assert dict(row) == {"text": VPN_MEMORY, "record_kind": "memory", "memory_type": "lesson",
                         "source_ref": "https://wiki.example/vpn"}

    stats = (await http.get("/v1/stats", params={"namespace": namespace})).json()
    assert stats["records"] == {"memory": 1}
    assert stats["index_points"] == 1

    answer = await http.get("/v1/search", params={
        "namespace": namespace, "query": "how do I connect to the staging db?"})
    assert answer.status_code == 200
    hits = answer.json()["hits"]
    assert [hit["record_id"] for hit in hits] == [record_id]
    assert hits[0]["source_ref"] == "https://wiki.example/vpn"
    assert hits[0]["kind"] == "memory"
    assert hits[0]["score"] >= 0.5
    assert hits[0]["created_at"]

    elsewhere = await http.get("/v1/search", params={
        "namespace": f"{namespace}-other", "query": "how do I connect to the staging db?"})
    assert elsewhere.json()["hits"] == []
    unrelated = await http.get("/v1/search", params={
        "namespace": namespace, "query": "chocolate cake recipe with cherries"})
    assert unrelated.json()["hits"] == [], "below the default min score of 0.5"


def kcat_produce(bootstrap: str, topic: str, path: Path) -> None:
    # murmur2_random: the Java and aiokafka partitioner, so keys land where theirs do.
    subprocess.run(["kcat", "-b", bootstrap, "-X", "topic.partitioner=murmur2_random",
                    "-t", topic, "-P", "-K", "|", "-l", str(path)],
                   check=True, timeout=60)


async def test_run_events_from_kcat_become_a_searchable_digest(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient,
    namespace: str, tmp_path: Path,
) -> None:
    run_id = f"run-{uuid.uuid4().hex[:6]}"
    key = run_id.encode()
    lines = [
        key + b"|" + event("run.started", namespace, {
            "run_id": run_id, "intent": "Upgrade the payment service to the new SDK",
            "task_key": "PAY-12"}),
        key + b"|" + event("run.step", namespace, {
            "run_id": run_id, "kind": "decision",
            "text": "Pin the SDK to 4.2 because 4.3 drops the refund API."}),
        key + b"|" + event("run.step", namespace, {
            "run_id": run_id, "kind": "status_change", "status": "build failing",
            "text": "integration tests time out against the sandbox"}),
        key + b"|" + event("run.finished", namespace, {
            "run_id": run_id, "status": "succeeded", "commits": ["9f1c2ab"],
            "files_changed": ["payments/client.py"]}),
    ]
    kcat_produce(stack.broker.bootstrap, "runs.events", tmp_file(tmp_path, "run.txt", lines))

    digest_id = digest_record_id(namespace, run_id)
    await updates.wait_for(lambda messages: digest_id in updated_ids(messages, namespace))
    answer = await http.get("/v1/search", params={
        "namespace": namespace, "query": "payment SDK upgrade", "kind": "run_digest",
        "min_score": "0.3"})
    hits = answer.json()["hits"]
    assert [hit["record_id"] for hit in hits] == [digest_id]
    assert "Pin the SDK to 4.2" in hits[0]["text"]
    assert "build failing" in hits[0]["text"]
    assert hits[0]["source_ref"] == f"run:{run_id}"

    only_memories = await http.get("/v1/search", params={
        "namespace": namespace, "query": "payment SDK upgrade", "kind": "memory",
        "min_score": "0.3"})
    assert only_memories.json()["hits"] == []


async def test_a_memory_from_kcat_is_searchable_and_related_ids_filter(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient,
    namespace: str, tmp_path: Path,
) -> None:
    first_event, second_event = uuid.uuid4().hex, uuid.uuid4().hex
    first_id = memory_record_id(namespace, first_event)
    second_id = memory_record_id(namespace, second_event)
    key = namespace.encode()
    lines = [
        key + b"|" + event("memory.write", namespace, {
            "text": "Release trains leave every Tuesday at 10:00 UTC."}, event_id=first_event),
        key + b"|" + event("memory.write", namespace, {
            "text": "Hotfixes may skip the Tuesday release train with two approvals.",
            "related_ids": [first_id], "source_ref": "handbook#hotfix"}, event_id=second_event),
    ]
    kcat_produce(stack.broker.bootstrap, "memory.events", tmp_file(tmp_path, "mem.txt", lines))
    await updates.wait_for(lambda messages: second_id in updated_ids(messages, namespace))

    related = await http.get("/v1/search", params={
        "namespace": namespace, "query": "when do releases ship?", "related_id": first_id,
        "min_score": "0"})
    assert [hit["record_id"] for hit in related.json()["hits"]] == [second_id]
    assert related.json()["hits"][0]["source_ref"] == "handbook#hotfix"


async def test_a_personal_memory_is_found_by_its_owner_only(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient, namespace: str
) -> None:
    async with Publisher(stack.broker.bootstrap, producer="tests") as publisher:
        shared = await publisher.write_memory(
            namespace, "The team's staging cluster restarts every Sunday night.")
        private = await publisher.write_memory(
            namespace, "I restart my staging shell every Sunday night.", scope="personal",
            agent_id="ann")
    await updates.wait_for(lambda messages: {shared, private} <= set(
        updated_ids(messages, namespace)))

    async def found(**params: str) -> list[str]:
        answer = await http.get("/v1/search", params={
            "namespace": namespace, "query": "staging restarts on Sunday", "min_score": "0.3",
            **params})
        return sorted(hit["record_id"] for hit in answer.json()["hits"])

    assert await found() == [shared]
    assert await found(agent_id="bob") == [shared]
    assert await found(agent_id="ann") == sorted([shared, private])


Searched = Callable[[SearchQuery], Awaitable[dict[str, Any]]]


class UnreachableIndex:
    """Failure injection: an index whose every search fails."""

    async def search(self, *args: object, **kwargs: object) -> list[object]:
        raise ConnectionError("qdrant is down")


@asynccontextmanager
async def searched_from_postgres(stack: Stack) -> AsyncIterator[Searched]:
    """`search` as the worker answers it with its index down (failure injection): the same
    algorithm over the records in Postgres."""
    stores = await PostgresStores.connect(stack.pg_dsn)
    fallback = await RecordsSearch.connect(stack.pg_dsn)
    embedder = Embedder.load(MODEL_DIR, threads=1)
    runtime = Runtime(stores=stores, embedder=embedder, metrics=Metrics(),
                      producer=None, announcements=None,  # type: ignore[arg-type]
                      max_event_bytes=1024)

    async def searched(query: SearchQuery) -> dict[str, Any]:
        # As /v1/search answers it.
        answer = search_answer(await search(runtime, UnreachableIndex(),  # type: ignore[arg-type]
                                            fallback, query))
        return dict(json.loads(answer.rendered()))

    try:
        yield searched
    finally:
        embedder.close()
        await fallback.close()
        await stores.close()


async def test_search_falls_back_to_postgres_when_the_index_is_down(
    stack: Stack, worker: Worker, updates: TopicReader, namespace: str
) -> None:
    async with Publisher(stack.broker.bootstrap, producer="tests") as publisher:
        record_id = await publisher.write_memory(namespace, VPN_MEMORY)
    await updates.wait_for(lambda messages: record_id in updated_ids(messages, namespace))

    async with searched_from_postgres(stack) as searched:
        answer = await searched(SearchQuery(
            "how do I connect to staging?",
            SearchScope(namespace, limit=5, min_score=0.5), PROFILES["default"]))
    assert answer["degraded"] is True
    assert [hit["record_id"] for hit in answer["hits"]] == [record_id]


async def test_search_refuses_a_request_without_namespace(http: httpx.AsyncClient) -> None:
    answer = await http.get("/v1/search", params={"query": "anything"})
    assert answer.status_code == 400
    assert "namespace" in answer.json()["error"]


async def test_replaying_the_same_events_duplicates_nothing(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient, namespace: str
) -> None:
    run_id = f"run-{uuid.uuid4().hex[:6]}"
    memories = [
        (namespace.encode(), event("memory.write", namespace, {"text": f"Fact number {n}."}))
        for n in range(5)
    ]
    run = [
        (run_id.encode(), event("run.started", namespace, {"run_id": run_id, "intent": "x"})),
        (run_id.encode(), event("run.finished", namespace, {"run_id": run_id,
                                                            "status": "failed", "error": "boom"})),
    ]
    for _ in range(2):  # the second pass is the replay: the very same bytes
        await produce(stack.broker.bootstrap, "memory.events", memories)
        await produce(stack.broker.bootstrap, "runs.events", run)
        await wait_caught_up(stack.broker.bootstrap, worker.app_id,
                             ["memory.events", "runs.events"])

    stats = (await http.get("/v1/stats", params={"namespace": namespace})).json()
    # The failed run's error also made a fix pattern (with no fix yet).
    assert stats["records"] == {"memory": 5, "run_digest": 1, "fix_pattern": 1}
    assert stats["index_points"] == 7
    announced = updated_ids(updates.messages, namespace)
    assert len(announced) == len(set(announced)) == 7
    connection = await asyncpg.connect(stack.pg_dsn)
    try:
        ledger = await connection.fetchval(
            "SELECT count(*) FROM run_events WHERE namespace = $1", namespace)
    finally:
        await connection.close()
    assert ledger == 2


def headers_of(messages: list, key: bytes) -> list[dict[str, str]]:  # type: ignore[type-arg]
    return [{k: v.decode() for k, v in m.headers.items()} for m in messages if m.key == key]


async def test_bad_input_goes_to_the_dlq_with_its_reason_while_valid_events_flow(
    stack: Stack, worker: Worker, updates: TopicReader, memory_dlq: TopicReader,
    runs_dlq: TopicReader, http: httpx.AsyncClient, namespace: str,
) -> None:
    key = namespace.encode()
    valid_before, valid_after = uuid.uuid4().hex, uuid.uuid4().hex
    missing_namespace = json.loads(event("memory.write", namespace, {"text": "t"}))
    del missing_namespace["namespace"]
    bad = [
        b"{this is not json",
        event("memory.explode", namespace, {"text": "t"}),
        event("memory.write", namespace, {"text": "x" * 100_000}),
        json.dumps(missing_namespace).encode(),
        event("memory.write", namespace, {"text": "t", "related_ids": ["mem_nowhere"]}),
        event("memory.write", namespace, {"text": "t", "related_ids": [f"r{n}" for n in range(11)]}
              ),
    ]
    await produce(stack.broker.bootstrap, "memory.events", [
        (key, event("memory.write", namespace, {"text": "Valid before the bad ones."},
                    event_id=valid_before)),
        *[(key, value) for value in bad],
        (key, event("memory.write", namespace, {"text": "Valid after the bad ones."},
                    event_id=valid_after)),
    ])
    await produce(stack.broker.bootstrap, "runs.events", [
        (key, event("run.step", namespace, {"run_id": "never-started", "kind": "note"})),
    ])

    dead = await memory_dlq.wait_for(lambda messages: len(headers_of(messages, key)) == len(bad))
    reasons = [headers["dlq.reason"] for headers in headers_of(dead, key)]
    assert reasons == ["malformed_json", "unknown_type", "oversized", "missing_namespace",
                       "broken_reference", "invalid_event"]
    ours = [m for m in dead if m.key == key]
    assert ours[0].value == b"{this is not json", "the original bytes are kept"
    assert ours[0].headers["dlq.source.topic"] == b"memory.events"
    assert ours[0].headers["dlq.error"]
    assert b"mem_nowhere" in ours[4].headers["dlq.error"]

    run_dead = await runs_dlq.wait_for(lambda messages: len(headers_of(messages, key)) == 1)
    assert headers_of(run_dead, key)[0]["dlq.reason"] == "broken_reference"

    expected = {memory_record_id(namespace, valid_before), memory_record_id(namespace, valid_after)}
    await updates.wait_for(lambda messages: expected <= set(updated_ids(messages, namespace)))
    metrics = (await http.get("/metrics")).text
    for reason in ("malformed_json", "unknown_type", "oversized", "missing_namespace"):
        assert f'memstream_dlq_total{{reason="{reason}",topic="memory.events"}}' in metrics


async def test_writes_wait_out_a_postgres_outage_and_none_is_lost(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient, namespace: str
) -> None:
    stack.postgres.stop()
    try:
        await produce(stack.broker.bootstrap, "memory.events", [
            (namespace.encode(), event("memory.write", namespace, {"text": f"Note {n}."}))
            for n in range(50)
        ])
        await asyncio.sleep(3)
        assert updated_ids(updates.messages, namespace) == [], "nothing is announced unstored"
        health = await http.get("/healthz")
        assert (health.status_code, health.json()["postgres"][:4]) == (503, "down")
    finally:
        stack.postgres.start()
    await updates.wait_for(lambda messages: len(set(updated_ids(messages, namespace))) == 50, 60)
    stats = (await http.get("/v1/stats", params={"namespace": namespace})).json()
    assert stats["records"] == {"memory": 50}
    metrics = (await http.get("/metrics")).text
    retries = re.search(r'^memstream_sink_retries_total\{topic="memory.events"\} (\S+)$',
                        metrics, re.MULTILINE)
    assert retries is not None and float(retries.group(1)) > 0


async def test_a_worker_killed_mid_stream_loses_and_duplicates_nothing(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient, namespace: str
) -> None:
    total = 2000
    key = namespace.encode()
    # Every text names numbers no other names: consolidation, which these 2000 writes
    # trigger, must find nothing to merge, so that every memory stays live.
    await produce(stack.broker.bootstrap, "memory.events", [
        (key, event("memory.write", namespace, {"text": f"Observation {n}: build {n + 5000} "
                                                        f"took {n + 9000} seconds."}))
        for n in range(total)
    ])
    await updates.wait_for(lambda messages: len(updated_ids(messages, namespace)) >= 300, 120)
    worker.kill()
    seen_at_kill = len(set(updated_ids(updates.messages, namespace)))
    assert seen_at_kill < total, "the kill must land mid-stream"
    worker.start()
    await updates.wait_for(
        lambda messages: len(set(updated_ids(messages, namespace))) == total, 300)
    await wait_caught_up(stack.broker.bootstrap, worker.app_id, ["memory.events"])
    await asyncio.sleep(1)

    stats = (await http.get("/v1/stats", params={"namespace": namespace})).json()
    assert stats["records"] == {"memory": total}
    assert stats["index_points"] == total
    connection = await asyncpg.connect(stack.pg_dsn)
    try:
        stored = await connection.fetchval(
            "SELECT count(DISTINCT source_event_id) FROM records WHERE namespace = $1", namespace)
    finally:
        await connection.close()
    assert stored == total
    announced = updated_ids(updates.messages, namespace)
    assert len(announced) == len(set(announced)) == total, "each announced once"
