"""Run learnings on the real pipeline: runs that meet one error and fix it the same way
propose one draft lesson (and their recurring decision one draft pattern), in the review
queue with provenance to the runs; more evidence grows the same memory; a replay changes
nothing; an approved lesson is searched like any memory."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
import httpx
import pytest

from harness.kafka_io import produce, wait_caught_up
from harness.stack import Stack, Worker
from memstream_client.ids import digest_record_id, fix_pattern_record_id
from processors.runs.signatures import signature_of
from tests.integration.conftest import event

pytestmark = pytest.mark.integration

DECISION = "Raise the database pool timeout to 60 s and retry the connection once."


def fixed_run(namespace: str, run_id: str, host: int) -> list[tuple[bytes, bytes]]:
    """A run of LOGIN-7 that times out on a database host, decides, and succeeds."""
    error = f"TimeoutError: connection to db-{host}.internal:5432 timed out after {host}s"
    steps: list[tuple[str, dict[str, Any]]] = [
        ("run.started", {"intent": "Fix the flaky login test", "task_key": "LOGIN-7",
                         "repo": "webapp"}),
        ("run.step", {"kind": "error", "error": error}),
        ("run.step", {"kind": "decision", "text": DECISION}),
        ("run.finished", {"status": "succeeded", "commits": [f"c0ffee{host}"],
                          "files_changed": ["app/db.py"]}),
    ]
    return [(run_id.encode(), event(type_, namespace, {"run_id": run_id, **payload}))
            for type_, payload in steps]


async def publish(stack: Stack, worker: Worker, events: list[tuple[bytes, bytes]]) -> None:
    """Publish run events and wait until the learnings they proposed are applied."""
    await produce(stack.broker.bootstrap, "runs.events", events)
    await wait_caught_up(stack.broker.bootstrap, worker.app_id, ["runs.events"])
    await wait_caught_up(stack.broker.bootstrap, worker.app_id, ["memory.events"])


async def queue(http: httpx.AsyncClient, namespace: str) -> dict[str, dict[str, Any]]:
    answer = await http.get("/v1/review-queue", params={"namespace": namespace})
    assert answer.status_code == 200, answer.text
    return {_named(item): item for item in answer.json()["items"]
            if item["kind"] == "proposed_lesson"}


def _named(item: dict[str, Any]) -> str:
    """A proposed learning by what it is: a lesson, or a pattern of decisions or gotchas."""
    if item["memory_type"] == "lesson":
        return "lesson"
    return "decision" if "repeatedly decided" in item["text"] else "gotcha"


async def record_state(stack: Stack, record_id: str) -> tuple[int, str, str, int]:
    connection = await asyncpg.connect(stack.pg_dsn)
    try:
        row = await connection.fetchrow(
            "SELECT version, text, review_state, (SELECT count(*) FROM record_versions v"
            " WHERE v.record_id = r.record_id) AS versions FROM records r WHERE record_id = $1",
            record_id)
    finally:
        await connection.close()
    assert row is not None
    return row["version"], row["text"], row["review_state"], row["versions"]


async def test_repeated_fixes_propose_a_draft_lesson_that_grows_and_is_approved(
    stack: Stack, worker: Worker, http: httpx.AsyncClient, namespace: str,
) -> None:
    runs = [f"login-{n}-{uuid.uuid4().hex[:6]}" for n in range(1, 5)]
    events = {run_id: fixed_run(namespace, run_id, host)
              for host, run_id in enumerate(runs, start=3)}
    await publish(stack, worker, events[runs[0]])
    assert await queue(http, namespace) == {}

    # A second run deciding the same: a recurring decision of LOGIN-7, a draft pattern.
    await publish(stack, worker, events[runs[1]])
    proposed = await queue(http, namespace)
    # The timeout met in both is a recurring gotcha too.
    assert sorted(proposed) == ["decision", "gotcha"]
    assert proposed["gotcha"]["text"].startswith(
        "Pattern in task LOGIN-7: runs repeatedly ran into: TimeoutError: connection to "
        "db-3.internal:5432 timed out after 3s\n")
    pattern = proposed["decision"]
    assert pattern["text"] == (f"Pattern in task LOGIN-7: runs repeatedly decided: {DECISION}"
                               f"\nRecurred in 2 runs: {runs[0]}, {runs[1]}.")
    assert pattern["source_ref"] == "task:LOGIN-7"

    # A third run fixing the same error: the fix pattern now proposes a draft lesson.
    await publish(stack, worker, events[runs[2]])
    proposed = await queue(http, namespace)
    lesson = proposed["lesson"]
    signature = signature_of("TimeoutError: connection to db-9.internal:5432 timed out after 9s")
    fix_id = fix_pattern_record_id(namespace, signature.signature_id)
    assert lesson["source_ref"] == f"fix_pattern:{fix_id}"
    assert lesson["related_ids"] == [fix_id, *(digest_record_id(namespace, run_id)
                                               for run_id in reversed(runs[:3]))]
    assert lesson["proposer"] == "memstream.run-learnings"
    assert lesson["version"] == 1
    assert f"Fixed in 3 runs: {', '.join(runs[:3])}." in lesson["text"]
    assert "when TimeoutError occurs (connection to <*> timed out after <*>)" in lesson["text"]
    assert lesson["review"]["approve"] == {"namespace": namespace, "decision": "approve",
                                           "record_id": lesson["record_id"]}
    assert proposed["decision"]["version"] == 2
    assert f"Recurred in 3 runs: {', '.join(runs[:3])}." in proposed["decision"]["text"]

    # A fourth grows the same lesson: a new version naming four runs.
    await publish(stack, worker, events[runs[3]])
    grown = (await queue(http, namespace))["lesson"]
    assert (grown["record_id"], grown["version"]) == (lesson["record_id"], 2)
    assert f"Fixed in 4 runs: {', '.join(runs)}." in grown["text"]

    # Replaying every run's events changes nothing.
    before = await record_state(stack, lesson["record_id"])
    await publish(stack, worker, [item for run_id in runs for item in events[run_id]])
    await asyncio.sleep(1.0)  # a learning published again would have been applied by now
    assert await record_state(stack, lesson["record_id"]) == before
    assert (await queue(http, namespace))["lesson"] == grown

    # Approved through the review flow, it is a lesson search finds.
    answer = await http.post("/v1/reviews", json=grown["review"]["approve"])
    assert answer.status_code == 202, answer.text
    await wait_caught_up(stack.broker.bootstrap, worker.app_id, ["memory.events"])
    assert "lesson" not in await queue(http, namespace)
    version, _, review_state, _ = await record_state(stack, lesson["record_id"])
    assert (version, review_state) == (3, "approved")
    # The index takes the approval a moment after the stage has read it.
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        found = await http.get("/v1/search", params={
            "namespace": namespace, "query": "database connection timed out",
            "min_score": "0.1", "limit": "20"})
        assert found.status_code == 200, found.text
        hits = {hit["record_id"]: hit for hit in found.json()["hits"]}
        if hits.get(lesson["record_id"], {}).get("review_state") == "approved":
            break
        assert asyncio.get_running_loop().time() < deadline, sorted(hits)
        await asyncio.sleep(0.2)
    assert hits[lesson["record_id"]]["memory_type"] == "lesson"
    assert hits[lesson["record_id"]]["review_state"] == "approved"
