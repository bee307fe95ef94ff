"""The planning plane on the real stack (docs/planning.md), on a real Beads file: an excerpt of
steveyegge/beads' own .beads/issues.jsonl (tests/fixtures/beads/beads-2025-12), copied into a
checkout the session's worker knows as `beads-fixture`.

A run started on `bd-2vh3.5` claims it; its pack shows the item, its open blocker and its
ready siblings; a sync writes the claim into the file as bd writes it; the run's finish
closes it and files its next steps as follow-ups `discovered-from` it, which the next sync
writes, the rest of the file byte for byte as it was; a replay of the finish adds nothing. A
missing and a corrupt file answer the pack 200 with `degraded` naming planning; bad planning
events are dead-lettered with their reasons and bad requests refused with theirs."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from harness.kafka_io import TopicReader, produce, wait_caught_up
from harness.stack import Stack, Worker
from processors.planning.beads import Change, Claim, Close, FollowUp, apply, parse, serialize
from tests.integration.conftest import event, planning_checkout
from tests.integration.test_cli import memstream
from tests.integration.test_write_endpoints import posted

pytestmark = pytest.mark.integration

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "beads" / "beads-2025-12" / \
    "issues.jsonl"
REPO, REF, AGENT = "beads-fixture", "bd-2vh3.5", "agent-7"
SUMMARY = "Auto-squash runs when a molecule completes; covered by TestAutoSquash."
NEXT_STEPS = ["Document auto-squash in docs/squash.md",
              "Measure squash time on 500 steps\nThe CI box took 4 s for 100."]


@pytest.fixture(scope="session")
async def planning_dlq(stack: Stack) -> AsyncIterator[TopicReader]:
    async with TopicReader(stack.broker.bootstrap, "planning.events.dlq") as reader:
        yield reader


def issues_of(stack: Stack, repo: str) -> Path:
    return planning_checkout(stack, repo) / ".beads" / "issues.jsonl"


async def item_state(http: httpx.AsyncClient, namespace: str, status: str) -> dict[str, Any]:
    """The item's planning context once it shows `status` (a write-back laid over the file
    shows before any sync)."""
    for _ in range(300):
        answer = await http.get(f"/v1/planning/items/{REF}",
                                params={"namespace": namespace, "repo": REPO})
        assert answer.status_code == 200, answer.text
        if answer.json()["item"]["status"] == status:
            found: dict[str, Any] = answer.json()
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"{REF} never showed {status}: {answer.text}")


async def synced(http: httpx.AsyncClient, stack: Stack, namespace: str, expected: str) -> None:
    """Ask for a sync, and wait for the file to hold `expected`."""
    await posted(http, "/v1/planning/sync", {"namespace": namespace, "repo": REPO})
    path = issues_of(stack, REPO)
    for _ in range(300):
        if path.read_text(encoding="utf-8") == expected:
            return
        await asyncio.sleep(0.1)
    assert path.read_text(encoding="utf-8") == expected


async def test_a_run_claims_its_item_packs_its_plan_and_closes_it_with_follow_ups(
    stack: Stack, worker: Worker, http: httpx.AsyncClient, namespace: str, tmp_path: Path,
) -> None:
    original = FIXTURE.read_text(encoding="utf-8")
    issues_of(stack, REPO).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(FIXTURE, issues_of(stack, REPO))
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    started_at = datetime(2026, 11, 25, 9, 30, 0, 250000, tzinfo=UTC)
    finished_at = started_at + timedelta(minutes=42)

    await posted(http, "/v1/runs/events", {
        "type": "run.started", "namespace": namespace, "occurred_at": started_at.isoformat(),
        "payload": {"run_id": run_id, "intent": "auto-squash molecules", "agent": AGENT,
                    "repo": REPO, "planning_ref": REF}})
    claimed = await item_state(http, namespace, "in_progress")
    assert claimed["item"]["assignee"] == AGENT
    assert [(b["id"], b["status"], b["open"]) for b in claimed["blockers"]] == \
        [("bd-2vh3.4", "open", True)]

    pack = (await http.get("/v1/context", params={
        "namespace": namespace, "query": "auto-squash on molecule completion",
        "planning_ref": REF, "repo": REPO, "explain": "true"})).json()
    assert pack["degraded"] == []
    planning = pack["sections"]["planning"]
    assert [(item["kind"], item["source"]) for item in planning] == [
        ("planning_item", f"beads:{REPO}#{REF}"),
        ("planning_blocker", f"beads:{REPO}#bd-2vh3.4"),
        ("planning_ready_sibling", f"beads:{REPO}#bd-2vh3.4"),
        ("planning_ready_sibling", f"beads:{REPO}#bd-2vh3.6")]
    assert "Tier 4: Auto-squash on molecule completion" in planning[0]["text"]
    assert "status in_progress, priority P" in planning[0]["text"]
    assert all(item["token_cost"] > 0 and "explain" not in item for item in planning)
    assert pack["tokens"] >= sum(item["token_cost"] for item in planning)

    claim: list[Change] = [Claim(REF, AGENT, started_at)]
    after_claim = serialize(apply(parse(original), claim))
    await synced(http, stack, namespace, after_claim)
    line = next(json.loads(text) for text in after_claim.splitlines()
                if text.startswith(f'{{"id":"{REF}"'))
    assert (line["status"], line["assignee"], line["started_at"]) == \
        ("in_progress", AGENT, "2026-11-25T09:30:00.25Z")

    finished = {"type": "run.finished", "namespace": namespace,
                "event_id": f"fin-{run_id}", "occurred_at": finished_at.isoformat(),
                "payload": {"run_id": run_id, "status": "succeeded", "summary": SUMMARY,
                            "next_steps": NEXT_STEPS}}
    await posted(http, "/v1/runs/events", finished)
    closed = await item_state(http, namespace, "closed")
    assert closed["item"]["close_reason"] == SUMMARY
    finish: list[Change] = [
        Close(REF, SUMMARY, finished_at),
        FollowUp(REF, "Document auto-squash in docs/squash.md", f"Found by run {run_id}.",
                 AGENT, finished_at),
        FollowUp(REF, "Measure squash time on 500 steps",
                 f"The CI box took 4 s for 100.\n\nFound by run {run_id}.", AGENT,
                 finished_at)]
    expected = serialize(apply(parse(original), [*claim, *finish]))
    await synced(http, stack, namespace, expected)
    new_lines = [text for text in expected.splitlines() if text not in original.splitlines()]
    assert len(expected.splitlines()) == len(original.splitlines()) + 2
    follow_ups = [json.loads(text) for text in new_lines if not text.startswith(f'{{"id":"{REF}"')]
    assert sorted(item["title"] for item in follow_ups) == sorted(
        ["Document auto-squash in docs/squash.md", "Measure squash time on 500 steps"])
    assert all(item["dependencies"][0]["type"] == "discovered-from" and
               item["dependencies"][0]["depends_on_id"] == REF for item in follow_ups)

    # The listing reads the file back: the follow-ups are ready, the item closed.
    listed = (await http.get("/v1/planning/items",
                             params={"namespace": namespace, "repo": REPO})).json()
    rows = {row["id"]: row for row in listed["items"]}
    assert rows[REF]["status"] == "closed" and not rows[REF]["ready"]
    assert all(rows[item["id"]]["ready"] for item in follow_ups)
    assert rows["bd-2vh3.4"]["ready"] and rows["bd-2vh3.6"]["ready"]
    # The same from the command line.
    listing = memstream("plan", "list", REPO, "-n", namespace, url=worker.base_url,
                        key=stack.operator_key, home=tmp_path)
    assert listing.code == 0, listing.err
    assert re.search(rf"^{re.escape(REF)} +closed +\d +bd-2vh3\.4 +Tier 4: Auto-squash",
                     listing.out, re.M), listing.out
    assert re.search(r"^bd-2vh3\.6 +open +\d +yes +Tier 5", listing.out, re.M), listing.out
    shown = memstream("plan", "show", REPO, "bd-2vh3.6", "-n", namespace,
                      url=worker.base_url, key=stack.operator_key, home=tmp_path)
    assert shown.code == 0, shown.err
    assert shown.out.startswith("bd-2vh3.6 [open, P"), shown.out
    assert re.search(r"^ready sibling +bd-2vh3\.4 +open", shown.out, re.M), shown.out

    # A replayed finish publishes the same write-backs, applied once: nothing pending, the
    # file as it was.
    await posted(http, "/v1/runs/events", finished)
    await wait_caught_up(stack.broker.bootstrap, worker.app_id, ["runs.events"])
    await synced(http, stack, namespace, expected)
    await wait_caught_up(stack.broker.bootstrap, worker.app_id, ["planning.events"])
    connection = await asyncpg.connect(stack.pg_dsn)
    try:
        states = await connection.fetch(
            "SELECT type, state FROM planning_writebacks WHERE namespace = $1 ORDER BY seq",
            namespace)
        # What the sync read back was published and kept as the items last read.
        kept = await connection.fetch(
            "SELECT item_id, fields->>'status' AS status FROM planning_items "
            "WHERE namespace = $1 AND repo = $2", namespace, REPO)
    finally:
        await connection.close()
    assert {row["item_id"]: row["status"] for row in kept}[REF] == "closed"
    assert {item["id"] for item in follow_ups} <= {row["item_id"] for row in kept}
    assert [(row["type"], row["state"]) for row in states] == [
        ("planning.claimed", "applied"), ("planning.closed", "applied"),
        ("planning.followup_discovered", "applied"),
        ("planning.followup_discovered", "applied")]
    assert issues_of(stack, REPO).read_text(encoding="utf-8") == expected


async def test_a_missing_or_corrupt_file_degrades_the_pack_and_bad_input_is_refused(
    stack: Stack, worker: Worker, http: httpx.AsyncClient, namespace: str,
    planning_dlq: TopicReader,
) -> None:
    corrupt = issues_of(stack, "corrupt")
    corrupt.parent.mkdir(parents=True, exist_ok=True)
    lines = FIXTURE.read_text(encoding="utf-8").splitlines()
    corrupt.write_text("\n".join([*lines[:3], lines[3][:50], *lines[4:]]) + "\n",
                       encoding="utf-8")
    for repo in ("no-file", "corrupt"):
        answer = await http.get("/v1/context", params={
            "namespace": namespace, "query": "auto-squash", "planning_ref": REF,
            "repo": repo})
        assert answer.status_code == 200, answer.text
        assert answer.json()["degraded"] == ["planning"], repo
        assert answer.json()["sections"]["planning"] == []
        listed = (await http.get("/v1/planning/items",
                                 params={"namespace": namespace, "repo": repo})).json()
        assert listed["degraded"] == ["planning"]
    assert "line 4: not JSON" in listed["degraded_why"]
    metrics = (await http.get("/metrics")).text
    failed = next(line for line in metrics.splitlines() if line.startswith(
        'memstream_planning_total{operation="read",outcome="failed"}'))
    assert float(failed.split()[-1]) >= 4

    # Refused at the door, with the reason.
    refusals = [
        ("/v1/context", {"namespace": namespace, "query": "x", "planning_ref": REF}, 400,
         "planning_ref needs one repo"),
        ("/v1/planning/items", {"namespace": namespace, "repo": "unknown-repo"}, 404,
         "no planning for repo"),
        ("/v1/planning/items", {"namespace": namespace, "repo": "no spaces"}, 400, "repo")]
    for route, params, status, said in refusals:
        answer = await http.get(route, params=params)
        assert (answer.status_code, said in answer.text) == (status, True), answer.text
    no_repo = await http.post("/v1/runs/events", json={
        "type": "run.started", "namespace": namespace,
        "payload": {"run_id": "r-1", "planning_ref": REF}})
    assert no_repo.status_code == 400 and "planning_ref needs the run's repo" in no_repo.text
    unknown = await http.post("/v1/planning/sync", json={"namespace": namespace,
                                                         "repo": "unknown-repo"})
    assert unknown.status_code == 404, unknown.text

    # Dead-lettered by the stage, with the reason.
    claim = {"repo": REPO, "item_id": REF, "run_id": "r-1", "assignee": AGENT}
    bad = {
        "invalid_event": event("planning.item_upserted", namespace, {
            "repo": REPO, "item_id": "bd-1", "item": {"id": "bd-2", "title": "t"}}),
        "broken_reference": event("planning.claimed", namespace,
                                  {**claim, "repo": "unknown-repo"}),
        "unknown_type": event("planning.reopened", namespace, claim),
        "malformed_json": b"{not json",
    }
    keys = {reason: f"bad-{reason}-{uuid.uuid4().hex[:6]}".encode() for reason in bad}
    await produce(stack.broker.bootstrap, "planning.events",
                  [(keys[reason], value) for reason, value in bad.items()])
    await planning_dlq.wait_for(lambda m: set(keys.values()) <= {x.key for x in m}, 60)
    for reason, key in keys.items():
        (letter,) = [m for m in planning_dlq.messages if m.key == key]
        assert (letter.headers["dlq.reason"].decode(), letter.value) == (reason, bad[reason])
