"""Run history on the real pipeline: errors met in runs become one signature, and the run
that succeeded after them becomes the evidence of its fix."""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx
import pytest

from harness.kafka_io import TopicReader, produce, wait_caught_up
from harness.stack import Stack, Worker
from memstream_client.ids import digest_record_id, fix_pattern_record_id
from tests.integration.conftest import event

pytestmark = pytest.mark.integration

TRACE = """Traceback (most recent call last):
  File "/srv/ci/build-{build}/app/cache.py", line {line}, in load_user
    return self._users[user_id]
KeyError: 'user-{user}'"""


def run_events(namespace: str, run_id: str, *steps: tuple[str, dict[str, Any]]) -> list[
        tuple[bytes, bytes]]:
    return [(run_id.encode(), event(type_, namespace, {"run_id": run_id, **payload}))
            for type_, payload in steps]


async def fix_patterns(http: httpx.AsyncClient, namespace: str, error: str) -> dict[str, Any]:
    answer = await http.get("/v1/fix-patterns", params={"namespace": namespace, "error": error})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


async def fix_pattern_state(stack: Stack, record_id: str) -> tuple[int, str, int]:
    connection = await asyncpg.connect(stack.pg_dsn)
    try:
        row = await connection.fetchrow(
            "SELECT version, text, (SELECT count(*) FROM record_versions v"
            " WHERE v.record_id = r.record_id) AS versions FROM records r WHERE record_id = $1",
            record_id)
    finally:
        await connection.close()
    assert row is not None
    return row["version"], row["text"], row["versions"]


async def test_two_failures_and_a_fix_become_one_signature_with_its_evidence(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient,
    namespace: str,
) -> None:
    failed_1, failed_2, fixed = (f"run-{uuid.uuid4().hex[:6]}" for _ in range(3))
    task = {"task_key": "CACHE-7", "repo": "acme/web"}
    first_trace = TRACE.format(build=101, line=42, user="1234")
    second_trace = TRACE.format(build=117, line=57, user="98765")
    events = [
        *run_events(namespace, failed_1,
                    ("run.started", {"intent": "Warm the user cache on boot", **task}),
                    ("run.step", {"kind": "tool_call", "tool": "pytest"}),
                    ("run.step", {"kind": "error", "error": first_trace}),
                    ("run.finished", {"status": "failed", "error": first_trace})),
        *run_events(namespace, failed_2,
                    ("run.started", {"intent": "Warm the user cache on boot", **task}),
                    ("run.step", {"kind": "error", "error": second_trace}),
                    ("run.finished", {"status": "failed", "error": second_trace})),
        *run_events(namespace, fixed,
                    ("run.started", {"intent": "Warm the user cache on boot", **task}),
                    ("run.step", {"kind": "decision",
                                  "text": "Load users lazily and fall back to the database."}),
                    ("run.artifact", {"kind": "patch", "ref": f"artifacts/{fixed}/lazy.diff",
                                      "title": "lazy user cache"}),
                    ("run.finished", {"status": "succeeded", "commits": ["7c0ffee"],
                                      "pull_requests": ["acme/web#88"],
                                      "files_changed": ["app/cache.py"]})),
    ]
    # Each run in turn, as an orchestrator would run them.
    for run_id in (failed_1, failed_2, fixed):
        await produce(stack.broker.bootstrap, "runs.events",
                      [item for item in events if item[0] == run_id.encode()])
        await wait_caught_up(stack.broker.bootstrap, worker.app_id, ["runs.events"])

    lookup = TRACE.format(build=3, line=99, user="5")  # a third variant, never published
    answer = await fix_patterns(http, namespace, lookup)
    exact = answer["fix_patterns"][0]
    assert exact["match"] == "exact"
    signature_id = answer["signature"]["signature_id"]
    assert exact["record_id"] == fix_pattern_record_id(namespace, signature_id)
    assert exact["exception_type"] == answer["signature"]["exception_type"]
    assert exact["occurrences"]["count"] == 2
    assert exact["occurrences"]["runs"] == [failed_1, failed_2]
    (fix,) = exact["fixes"]
    assert fix["run_id"] == fixed
    assert fix["after_runs"] == sorted([failed_1, failed_2])
    assert fix["commits"] == ["7c0ffee"]
    assert fix["pull_requests"] == ["acme/web#88"]
    assert fix["files_changed"] == ["app/cache.py"]
    assert "commit 7c0ffee" in fix["key_changes"]
    assert fix["digest_record_id"] == digest_record_id(namespace, fixed)
    assert exact["success_count"] == 1
    assert f"- run {fixed}" in exact["text"]

    connection = await asyncpg.connect(stack.pg_dsn)
    try:
        signatures = await connection.fetchval(
            "SELECT count(DISTINCT signature_id) FROM error_occurrences WHERE namespace = $1",
            namespace)
    finally:
        await connection.close()
    assert signatures == 1
    metrics = (await http.get("/metrics")).text
    python_errors = re.search(
        r'^memstream_error_occurrences_total\{dialect="python"\} (\S+)$', metrics, re.M)
    assert python_errors is not None and float(python_errors.group(1)) >= 4

    # The fixing run's digest tells how it went, with its evidence.
    digest = await http.get("/v1/search", params={
        "namespace": namespace, "query": "warm the user cache", "kind": "run_digest",
        "min_score": "0.2", "limit": "5"})
    texts = {hit["record_id"]: hit["text"] for hit in digest.json()["hits"]}
    assert "Load users lazily" in texts[digest_record_id(namespace, fixed)]
    assert f"artifacts/{fixed}/lazy.diff" in texts[digest_record_id(namespace, fixed)]
    assert "KeyError: 'user-1234'; unresolved" in texts[digest_record_id(namespace, failed_1)]

    # /v1/search filters by kind: fix patterns only.
    found = await http.get("/v1/search", params={
        "namespace": namespace, "query": "KeyError in load_user", "kind": "fix_pattern",
        "min_score": "0.2"})
    assert [hit["record_id"] for hit in found.json()["hits"]] == [exact["record_id"]]

    # Replaying every event changes nothing: no new version, no new announcement.
    state_before = await fix_pattern_state(stack, exact["record_id"])
    announced_before = announcements(updates, namespace)
    await produce(stack.broker.bootstrap, "runs.events", events)
    await wait_caught_up(stack.broker.bootstrap, worker.app_id, ["runs.events"])
    await asyncio.sleep(1.0)  # announcements would have arrived by now
    assert await fix_pattern_state(stack, exact["record_id"]) == state_before
    assert announcements(updates, namespace) == announced_before
    again = await fix_patterns(http, namespace, lookup)
    assert again["fix_patterns"][0]["occurrences"] == exact["occurrences"]
    assert again["fix_patterns"][0]["fixes"] == exact["fixes"]


async def test_a_fix_that_arrives_before_the_failures_is_still_attached(
    stack: Stack, worker: Worker, http: httpx.AsyncClient, namespace: str,
) -> None:
    """Runs sit on different partitions, so their relative order is not guaranteed: the
    facts decide, not the arrival order."""
    failed, fixed = f"run-{uuid.uuid4().hex[:6]}", f"run-{uuid.uuid4().hex[:6]}"
    now = time.time()
    error = "java.lang.IllegalStateException: pool exhausted after 30000 ms"
    failing = [
        (failed.encode(), at(event("run.started", namespace, {"run_id": failed,
                                                              "repo": "acme/jobs"}), now - 60)),
        (failed.encode(), at(event("run.finished", namespace, {
            "run_id": failed, "status": "failed", "error": error}), now - 50)),
    ]
    fixing = [
        (fixed.encode(), at(event("run.started", namespace, {"run_id": fixed,
                                                             "repo": "acme/jobs"}), now - 40)),
        (fixed.encode(), at(event("run.finished", namespace, {
            "run_id": fixed, "status": "succeeded", "commits": ["b16b00b"]}), now - 30)),
    ]
    await produce(stack.broker.bootstrap, "runs.events", fixing)
    await wait_caught_up(stack.broker.bootstrap, worker.app_id, ["runs.events"])
    await produce(stack.broker.bootstrap, "runs.events", failing)
    await wait_caught_up(stack.broker.bootstrap, worker.app_id, ["runs.events"])

    answer = await fix_patterns(http, namespace, error.replace("30000", "45000"))
    exact = answer["fix_patterns"][0]
    assert exact["match"] == "exact"
    assert [fix["run_id"] for fix in exact["fixes"]] == [fixed]
    assert exact["fixes"][0]["commits"] == ["b16b00b"]


async def test_fix_pattern_lookup_refuses_a_request_without_the_error(
    http: httpx.AsyncClient, namespace: str
) -> None:
    answer = await http.get("/v1/fix-patterns", params={"namespace": namespace})
    assert answer.status_code == 400
    assert "error" in answer.json()["error"]


async def test_an_unknown_error_has_no_fix_pattern(
    http: httpx.AsyncClient, namespace: str
) -> None:
    answer = await fix_patterns(http, namespace, "ZeroDivisionError: division by zero")
    assert answer["fix_patterns"] == []
    assert answer["signature"]["signature_id"].startswith("sig_")


def at(value: bytes, epoch_seconds: float) -> bytes:
    """The event with its occurred_at moved to `epoch_seconds`."""
    document = json.loads(value)
    document["occurred_at"] = datetime.fromtimestamp(epoch_seconds, UTC).isoformat()
    return json.dumps(document).encode()


def announcements(updates: TopicReader, namespace: str) -> list[tuple[str, int, str]]:
    found = []
    for message in updates.messages:
        body = json.loads(message.value)
        if body["namespace"] == namespace:
            found.append((body["record_id"], body["version"], body["change"]))
    return found
