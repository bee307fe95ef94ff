"""Windowed counts trigger consolidation, and consolidation merges duplicates without losing
anything: on the real broker, Postgres, qdrant-edge, model and worker process."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx
import pytest

from harness.kafka_io import Received, TopicReader, produce, wait_caught_up
from harness.stack import MODEL, Stack, Worker
from publisher.kafka_publisher import Publisher
from streams.app import group_id
from streams.plumbing.config import REPO_ROOT
from tests.integration.conftest import event

pytestmark = pytest.mark.integration

# Two groups of the same memory recorded again (key terms kept, wording changed) among
# distinct memories on nearby topics.
VPN = [
    "The staging database only accepts connections over the office VPN.",
    "Connections to the staging database are only accepted over the office VPN.",
    "Over the office VPN only: the staging database accepts no other connections.",
]
APPROVALS = [
    "Production deploys need two approvals in the release channel.",
    "A deploy to production needs two approvals in the release channel.",
]
DISTINCT = [
    "The billing service retries failed webhooks five times with exponential backoff.",
    "Nightly backups of the analytics warehouse are kept for thirty days.",
    "Feature flags are evaluated on the client for the mobile apps.",
    "The search cluster is reindexed every Sunday at 03:00 UTC.",
    "The on-call rotation changes every Monday at noon.",
]
LATER = [f"Service {name} logs to the {name}-events index in the shared cluster."
         for name in ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf",
                      "hotel", "india", "juliet")]


@pytest.fixture(scope="module")
async def requests(stack: Stack) -> AsyncIterator[TopicReader]:
    reader = await TopicReader(stack.broker.bootstrap, "memory.consolidate").start()
    yield reader
    await reader.close()


def requests_for(messages: list[Received], namespace: str) -> list[Received]:
    return [m for m in messages if json.loads(m.value)["namespace"] == namespace]


def changes_for(messages: list[Received], namespace: str) -> list[tuple[str, str, int]]:
    bodies = [json.loads(message.value) for message in messages]
    return [(body["change"], body["record_id"], body["version"]) for body in bodies
            if body["namespace"] == namespace]


async def write(stack: Stack, namespace: str, texts: list[str]) -> list[str]:
    async with Publisher(stack.broker.bootstrap, producer="tests") as publisher:
        return [await publisher.write_memory(namespace, text, memory_type="fact")
                for text in texts]


async def settled(stack: Stack, worker: Worker) -> None:
    """Everything written is stored, and every request consolidated and published."""
    await wait_caught_up(stack.broker.bootstrap, worker.app_id, ["memory.events"])
    await wait_caught_up(stack.broker.bootstrap, group_id(worker.app_id, "consolidator"),
                         ["memory.consolidate"])
    connection = await asyncpg.connect(stack.pg_dsn)
    try:
        while await connection.fetchval(
                "SELECT count(*) FROM maintenance_reports WHERE announced_at IS NULL"):
            await asyncio.sleep(0.1)
    finally:
        await connection.close()


async def test_the_tenth_new_memory_triggers_one_consolidation_a_day_that_merges_duplicates(
    stack: Stack, worker: Worker, updates: TopicReader, requests: TopicReader,
    http: httpx.AsyncClient, namespace: str,
) -> None:
    first_nine = VPN + APPROVALS + DISTINCT[:4]
    ids = await write(stack, namespace, first_nine)
    await updates.wait_for(lambda m: len(changes_for(m, namespace)) == 9)
    await settled(stack, worker)
    assert requests_for(requests.messages, namespace) == [], "9 new memories: no trigger"
    counts = (await http.get("/v1/consolidation/counts", params={"namespace": namespace})).json()
    # Nine memories, in one window or two if a window boundary passed meanwhile.
    assert sum(window["memories"] for window in counts["windows"]) == 9
    assert counts["new_since_report"] == 9
    assert counts["skip_reason"] == "too_few_new_memories"
    assert counts["last_request"] is None

    ids += await write(stack, namespace, DISTINCT[4:])
    await requests.wait_for(lambda m: len(requests_for(m, namespace)) == 1)
    (request,) = requests_for(requests.messages, namespace)
    assert request.key == namespace.encode()
    assert json.loads(request.value)["payload"] == {"reason": "new_memories",
                                                    "new_memories": 10}

    # The consolidation it triggers: each group of duplicates merged into one new memory, a
    # draft that hides nothing until a reviewer approves it.
    vpn_ids, approval_ids = set(ids[:3]), set(ids[3:5])
    await updates.wait_for(lambda m: sum(
        change == "merged" for change, _, _ in changes_for(m, namespace)) == 2)
    await settled(stack, worker)
    changes = changes_for(updates.messages, namespace)
    assert not any(change == "superseded" for change, _, _ in changes)
    merged = [record_id for change, record_id, _ in changes if change == "merged"]
    assert len(merged) == 2

    reports = (await http.get("/v1/consolidation/reports",
                              params={"namespace": namespace})).json()["reports"]
    (report,) = reports
    assert report["reason"] == "new_memories" and report["memories"] == 10
    assert sorted(len(cluster["members"]) for cluster in report["clusters"]) == [2, 3]
    assert {frozenset(cluster["members"]) for cluster in report["clusters"]} == {
        frozenset(vpn_ids), frozenset(approval_ids)}
    assert {cluster["review_state"] for cluster in report["clusters"]} == {"draft"}
    assert report["merged_ids"] == [], "drafts supersede nothing"
    assert set(report["new_ids"]) == set(merged)
    assert {"load", "embed", "cluster", "merge", "store", "total", "publish"} <= set(
        report["timings"])

    query = "how do I reach the staging database?"
    vpn_merge = next(c["new_id"] for c in report["clusters"] if set(c["members"]) == vpn_ids)
    hits = (await http.get("/v1/search", params={"namespace": namespace,
                                                 "query": query})).json()["hits"]
    assert vpn_merge not in {hit["record_id"] for hit in hits}
    assert vpn_ids <= {hit["record_id"] for hit in hits}, "the members stay live"

    # Approved, each merge replaces its members.
    async with Publisher(stack.broker.bootstrap, producer="tests") as publisher:
        for new_id in merged:
            await publisher.review_memory(namespace, new_id, decision="approve", reviewer="ana")
    await updates.wait_for(lambda m: sum(
        change == "superseded" for change, _, _ in changes_for(m, namespace)) == 5)
    changes = changes_for(updates.messages, namespace)
    superseded = {record_id: version for change, record_id, version in changes
                  if change == "superseded"}
    assert superseded == {record_id: 2 for record_id in vpn_ids | approval_ids}
    assert sorted(record_id for change, record_id, _ in changes if change == "approved") \
        == sorted(merged)

    # Search returns the replacement, not what it replaced.
    hits = (await http.get("/v1/search", params={"namespace": namespace,
                                                 "query": query})).json()["hits"]
    assert hits[0]["record_id"] == vpn_merge
    assert not vpn_ids & {hit["record_id"] for hit in hits}

    # Nothing deleted: every superseded memory is kept and reachable from its replacement.
    lineage = (await http.get(f"/v1/records/{vpn_merge}",
                              params={"namespace": namespace})).json()
    assert {member["record_id"] for member in lineage["supersedes"]} == vpn_ids
    assert lineage["record"]["trust_class"] == "approved", "approved by a reviewer"
    assert set(lineage["record"]["body"]["merged_from"]) == vpn_ids
    assert VPN[0] in lineage["record"]["text"]
    for member in vpn_ids:
        old = (await http.get(f"/v1/records/{member}", params={"namespace": namespace})).json()
        assert old["superseded_by"] == vpn_merge
        assert [v["version"] for v in old["versions"]] == [1, 2]
    stats = (await http.get("/v1/stats", params={"namespace": namespace})).json()
    assert stats["records"] == {"memory": 10 - 5 + 2}
    assert stats["index_points"] == 7
    assert await stored_memories(stack, namespace) == 12

    # Another batch the same day: counted, but no second trigger.
    await write(stack, namespace, LATER)
    await updates.wait_for(lambda m: sum(
        change == "created" for change, _, _ in changes_for(m, namespace)) == 20)
    await settled(stack, worker)
    assert len(requests_for(requests.messages, namespace)) == 1
    counts = (await http.get("/v1/consolidation/counts", params={"namespace": namespace})).json()
    assert sum(window["memories"] for window in counts["windows"]) == 20
    assert counts["new_since_report"] == 10
    assert counts["skip_reason"] == "report_today"
    assert counts["last_request"]["basis"] == f"day:{datetime.now(UTC).date().isoformat()}"
    assert counts["last_request"]["request_id"] == json.loads(request.value)["event_id"]

    # The same request again changes nothing.
    before = len(updates.messages)
    await produce(stack.broker.bootstrap, "memory.consolidate", [(request.key, request.value)])
    await settled(stack, worker)
    assert changes_for(updates.messages[before:], namespace) == []
    assert len((await http.get("/v1/consolidation/reports",
                               params={"namespace": namespace})).json()["reports"]) == 1
    assert await stored_memories(stack, namespace) == 22
    metrics = (await http.get("/metrics")).text
    assert 'memstream_consolidation_runs_total{outcome="already_done",reason="new_memories"}' \
        in metrics


async def stored_memories(stack: Stack, namespace: str) -> int:
    connection = await asyncpg.connect(stack.pg_dsn)
    try:
        count: int = await connection.fetchval(
            "SELECT count(*) FROM records WHERE namespace = $1", namespace)
    finally:
        await connection.close()
    return count


def consolidate_command(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MEMSTREAM_PG_DSN": stack.pg_dsn,
           "MEMSTREAM_KAFKA_BOOTSTRAP": stack.broker.bootstrap,
           "MEMSTREAM_MODEL": MODEL.name}
    return subprocess.run([sys.executable, "-m", "streams.commands.consolidate", *args],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


async def test_the_command_shows_what_would_merge_then_runs_a_manual_consolidation(
    stack: Stack, worker: Worker, updates: TopicReader, namespace: str,
) -> None:
    ids = await write(stack, namespace, APPROVALS + DISTINCT[:2])
    await updates.wait_for(lambda m: len(changes_for(m, namespace)) == 4)

    dry = consolidate_command(stack, "--namespace", namespace, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    summary: dict[str, Any] = json.loads(dry.stdout)
    assert summary["memories"] == 4
    assert [sorted(m["record_id"] for m in merge["members"]) for merge in summary["merges"]] \
        == [sorted(ids[:2])]
    assert await stored_memories(stack, namespace) == 4, "a dry run changes nothing"

    real = consolidate_command(stack, "--namespace", namespace, "--json")
    assert real.returncode == 0, real.stderr
    (report,) = json.loads(real.stdout)
    assert report["reason"] == "manual", "4 memories: only a manual request runs"
    assert [cluster["new_id"] for cluster in report["clusters"]] == [
        merge["new_id"] for merge in summary["merges"]]
    assert await stored_memories(stack, namespace) == 5

    listed = consolidate_command(stack, "--namespace", namespace, "--reports")
    assert listed.returncode == 0, listed.stderr
    assert report["report_id"] in listed.stdout and "1 clusters, 0 superseded" in listed.stdout


async def test_a_bad_consolidation_request_goes_to_the_dead_letter_topic(
    stack: Stack, worker: Worker, namespace: str,
) -> None:
    dlq = await TopicReader(stack.broker.bootstrap, "memory.consolidate.dlq").start()
    try:
        bad = event("memory.consolidate", namespace, {"reason": "because"},
                    event_id=uuid.uuid4().hex)
        await produce(stack.broker.bootstrap, "memory.consolidate",
                      [(namespace.encode(), bad)])
        (dead,) = await dlq.wait_for(lambda m: any(x.value == bad for x in m))
        assert dead.headers["dlq.reason"] == b"invalid_event"
        assert b"payload.reason" in dead.headers["dlq.error"]
    finally:
        await dlq.close()
