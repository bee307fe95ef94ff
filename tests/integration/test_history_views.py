"""The read views the browser's overview and history pages stand on, on the real stack: the
runs of a namespace and one run with its digest, errors and fixes (`/v1/runs`), the feed of
changes from a time (`/v1/changes?since=`), what names the records of the consolidation
reports, and the start of each graph node's text."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from harness.kafka_io import TopicReader, produce, wait_caught_up
from harness.stack import Stack, Worker
from memstream_client.ids import digest_record_id, fix_pattern_record_id
from publisher.kafka_publisher import Publisher
from tests.integration.test_consolidation import APPROVALS, VPN
from tests.integration.test_lifecycle import announced
from tests.integration.test_run_history import at, run_events

pytestmark = pytest.mark.integration

WAIT_S = 40.0
TIMEOUT = "TimeoutError: connection to db-7.internal:5432 timed out after 30s"
FINN_NOTE = "Finn reviews the release notes before every deploy to production."


async def eventually(read: Callable[[], Any], done: Callable[[Any], bool]) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while not done(value := await read()):
        assert loop.time() < deadline, f"still {value!r}"
        await asyncio.sleep(0.2)
    return value


def client(worker: Worker, token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=worker.base_url, timeout=10,
                             headers={"Authorization": f"Bearer {token}"})


async def publish_runs(stack: Stack, worker: Worker, namespace: str,
                       now: float) -> tuple[str, str, str]:
    """Three runs of one task, a minute or more apart: one that met a timeout (in a step, and
    restated when it failed), the next that fixed it with a commit, and one still going.
    Returns their ids, oldest first."""
    failed, fixed, going = (f"{name}-{namespace}" for name in ("failed", "fixed", "going"))
    task = {"task_key": "AUTH-7", "repo": "webapp"}
    timed = [
        (run_events(namespace, failed,
                    ("run.started", {"intent": "Fix the flaky login test", "agent": "builder",
                                     **task}),
                    ("run.step", {"kind": "error", "error": TIMEOUT}),
                    ("run.finished", {"status": "failed", "error": TIMEOUT})),
         now - 600),
        (run_events(namespace, fixed,
                    ("run.started", {"intent": "Fix the flaky login test", "agent": "builder",
                                     **task}),
                    ("run.step", {"kind": "decision",
                                  "text": "Raise the pool timeout to 60 s and retry once."}),
                    ("run.finished", {"status": "succeeded", "commits": ["4be2d1c"],
                                      "files_changed": ["app/db.py"]})),
         now - 300),
        (run_events(namespace, going,
                    ("run.started", {"intent": "Look for other flaky tests", "agent": "scout",
                                     **task})),
         now - 60),
    ]
    for events, start in timed:
        await produce(stack.broker.bootstrap, "runs.events",
                      [(key, at(value, start + 10 * step))
                       for step, (key, value) in enumerate(events)])
        await wait_caught_up(stack.broker.bootstrap, worker.app_id, ["runs.events"])
    return failed, fixed, going


async def fixed_history(http: httpx.AsyncClient, namespace: str, failed: str,
                        fixed: str) -> dict[str, Any]:
    """The failed run's view once its fix pattern names the run that fixed it."""

    async def read() -> dict[str, Any]:
        answer = await http.get(f"/v1/runs/{failed}", params={"namespace": namespace})
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body

    def has_fix(body: dict[str, Any]) -> bool:
        pattern = body["errors"][0]["fix_pattern"] if body["errors"] else None
        return pattern is not None and [fix["run_id"] for fix in pattern["fixes"]] == [fixed]

    return dict(await eventually(read, has_fix))


async def consolidated(stack: Stack, updates: TopicReader, http: httpx.AsyncClient,
                       namespace: str) -> tuple[list[str], list[str], list[str]]:
    """Untitled duplicates consolidated into drafts: the shared VPN memories, the shared
    approval ones, and Finn's own copy of the approval rule beside a note of his. Returns
    the ids of the three groups; the report is stored and published."""
    async with Publisher(stack.broker.bootstrap, producer="tests") as publisher:
        vpn = [await publisher.write_memory(namespace, text, memory_type="fact")
               for text in VPN]
        approvals = [await publisher.write_memory(namespace, text, memory_type="fact")
                     for text in APPROVALS]
        finn = [await publisher.write_memory(namespace, text, memory_type="fact",
                                             scope="personal", agent_id="finn")
                for text in (*APPROVALS, FINN_NOTE)]
        for record_id in (*vpn, *approvals, *finn):
            await announced(updates, record_id, [("created", 1)])
        await publisher.request_consolidation(namespace)

    async def reports() -> list[Any]:
        answer = await http.get("/v1/consolidation/reports", params={"namespace": namespace})
        assert answer.status_code == 200, answer.text
        return list(answer.json()["reports"])

    await eventually(reports, lambda found: len(found) == 1 and
                     found[0]["announced_at"] is not None)
    return vpn, approvals, finn


async def test_runs_are_listed_newest_first_and_filtered(
    stack: Stack, worker: Worker, http: httpx.AsyncClient, namespace: str,
) -> None:
    now = time.time()
    failed, fixed, going = await publish_runs(stack, worker, namespace, now)
    await fixed_history(http, namespace, failed, fixed)

    async def listed(**params: str) -> list[str]:
        answer = await http.get("/v1/runs", params={"namespace": namespace, **params})
        assert answer.status_code == 200, answer.text
        return [run["run_id"] for run in answer.json()["runs"]]

    answer = (await http.get("/v1/runs", params={"namespace": namespace})).json()
    assert [run["run_id"] for run in answer["runs"]] == [going, fixed, failed]
    assert answer["truncated"] is False
    first = answer["runs"][2]
    assert first == {
        "run_id": failed, "status": "failed", "task_key": "AUTH-7", "repo": "webapp",
        "agent": "builder", "intent": "Fix the flaky login test",
        "started_at": datetime.fromtimestamp(now - 600, UTC).isoformat(),
        "finished_at": datetime.fromtimestamp(now - 580, UTC).isoformat(),
        "event_count": 3, "error_count": 1}
    assert answer["runs"][0]["status"] == "unfinished"
    assert answer["runs"][0]["finished_at"] is None

    assert await listed(status="failed") == [failed]
    assert await listed(status="unfinished") == [going]
    assert await listed(status=["succeeded", "failed"]) == [fixed, failed]
    assert await listed(status="succeeded,unfinished") == [going, fixed]
    assert await listed(agent="scout") == [going]
    assert await listed(agent="nobody") == []
    since = datetime.fromtimestamp(now - 300, UTC).isoformat()
    assert await listed(since=since) == [going, fixed]
    cut = (await http.get("/v1/runs", params={"namespace": namespace, "limit": "1"})).json()
    assert ([run["run_id"] for run in cut["runs"]], cut["truncated"]) == ([going], True)

    for params, reason in (({"status": "done"}, "status: unknown 'done'"),
                           ({"limit": "0"}, "limit"), ({"limit": "501"}, "limit"),
                           ({"since": "yesterday"}, "since")):
        refused = await http.get("/v1/runs", params={"namespace": namespace, **params})
        assert refused.status_code == 400, (params, refused.text)
        assert reason in refused.json()["error"]


async def test_a_run_shows_its_ledger_digest_errors_and_the_runs_that_fixed_them(
    stack: Stack, worker: Worker, http: httpx.AsyncClient, namespace: str,
) -> None:
    failed, fixed, going = await publish_runs(stack, worker, namespace, time.time())
    shown = await fixed_history(http, namespace, failed, fixed)

    assert shown["run"]["run_id"] == failed and shown["run"]["status"] == "failed"
    assert [event["type"] for event in shown["events"]] == [
        "run.started", "run.step", "run.finished"]
    assert shown["events"][1]["payload"]["error"] == TIMEOUT
    digest = shown["digest"]
    assert digest["record_id"] == digest_record_id(namespace, failed)
    assert digest["title"] == f"Run {failed} failed (AUTH-7)"
    assert "TimeoutError: connection to db-7.internal:5432 timed out after 30s; unresolved" \
        in digest["text"]
    assert digest["body"]["status"] == "failed"
    (error,) = shown["errors"]
    # The failed run.finished restates its step's error: one occurrence, not two.
    assert (error["exception_type"], error["count"], error["example"]) == (
        "TimeoutError", 1, TIMEOUT)
    pattern = error["fix_pattern"]
    assert pattern["record_id"] == fix_pattern_record_id(namespace, error["signature_id"])
    assert pattern["occurrences"]["runs"] == [failed]
    (fix,) = pattern["fixes"]
    assert (fix["run_id"], fix["after_runs"], fix["commits"]) == (fixed, [failed], ["4be2d1c"])
    assert shown["fixed"] == []

    fixer = (await http.get(f"/v1/runs/{fixed}", params={"namespace": namespace})).json()
    assert fixer["errors"] == []
    assert fixer["fixed"] == [{"record_id": pattern["record_id"], "title": pattern["title"],
                               "signature_id": error["signature_id"], "after_runs": [failed]}]
    assert "commit 4be2d1c" in fixer["digest"]["text"]

    open_run = (await http.get(f"/v1/runs/{going}", params={"namespace": namespace})).json()
    assert (open_run["run"]["status"], open_run["digest"]) == ("unfinished", None)
    missing = await http.get("/v1/runs/no-such-run", params={"namespace": namespace})
    assert missing.status_code == 404
    assert missing.json() == {"error": f"no run 'no-such-run' in {namespace!r}"}


async def test_runs_answer_by_the_key_rules_of_every_read(
    stack: Stack, worker: Worker, http: httpx.AsyncClient, namespace: str,
) -> None:
    failed, fixed, _ = await publish_runs(stack, worker, namespace, time.time())
    await fixed_history(http, namespace, failed, fixed)
    # Runs, like their digests and fix patterns, are the namespace's: an agent's key reads
    # them; a key of another namespace, or without read, does not.
    finn = stack.make_key("--namespace", namespace, "--perm", "read", "--agent", "finn")
    elsewhere = stack.make_key("--namespace", f"{namespace}-b", "--perm", "read")
    writer = stack.make_key("--namespace", namespace, "--perm", "write")
    async with client(worker, finn) as as_finn:
        listed = await as_finn.get("/v1/runs", params={"namespace": namespace})
        assert [run["run_id"] for run in listed.json()["runs"]][1:] == [fixed, failed]
        one = await as_finn.get(f"/v1/runs/{failed}", params={"namespace": namespace})
        assert one.json()["digest"]["record_id"] == digest_record_id(namespace, failed)
    for token in (elsewhere, writer):
        async with client(worker, token) as other:
            for path in ("/v1/runs", f"/v1/runs/{failed}"):
                answer = await other.get(path, params={"namespace": namespace})
                assert answer.status_code == 403, answer.text
    async with httpx.AsyncClient(base_url=worker.base_url, timeout=10) as anonymous:
        assert (await anonymous.get("/v1/runs", params={"namespace": namespace})
                ).status_code == 401


async def test_changes_can_be_read_from_a_time(
    stack: Stack, updates: TopicReader, http: httpx.AsyncClient, namespace: str,
) -> None:
    async with Publisher(stack.broker.bootstrap, producer="tests") as publisher:
        first = await publisher.write_memory(namespace, "The first note of the day.")
        await announced(updates, first, [("created", 1)])
        between = datetime.now(UTC).isoformat()
        await asyncio.sleep(0.05)
        second = await publisher.write_memory(namespace, "The second note of the day.")
        await announced(updates, second, [("created", 1)])

    async def feed(**params: str) -> dict[str, Any]:
        answer = await http.get("/v1/changes", params={"namespace": namespace, **params})
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body

    assert [c["record_id"] for c in (await feed())["changes"]] == [first, second]
    since = await feed(since=between)
    assert [c["record_id"] for c in since["changes"]] == [second]
    # From a time with nothing after it, `next` resumes from that time.
    later = await feed(since=datetime.now(UTC).isoformat())
    assert later["changes"] == [] and later["next"]
    assert (await feed(after=later["next"]))["changes"] == []
    both = await http.get("/v1/changes", params={"namespace": namespace, "since": between,
                                                  "after": since["next"]})
    assert both.status_code == 400 and "not both" in both.json()["error"]


async def test_report_records_and_graph_nodes_carry_the_start_of_their_text(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient,
    namespace: str,
) -> None:
    vpn, approvals, finn = await consolidated(stack, updates, http, namespace)
    answer = (await http.get("/v1/consolidation/reports",
                             params={"namespace": namespace})).json()
    (report,) = answer["reports"]
    clusters = {frozenset(cluster["members"]): cluster["new_id"]
                for cluster in report["clusters"]}
    assert set(clusters) == {frozenset(vpn), frozenset(approvals), frozenset(finn[:2])}
    records = answer["records"]
    texts = dict(zip(vpn + approvals + finn, VPN + APPROVALS + APPROVALS + [FINN_NOTE],
                     strict=True))
    for member in vpn + approvals + finn[:2]:
        assert records[member] == {"record_kind": "memory", "title": None,
                                   "excerpt": texts[member]}
    for new_id in clusters.values():
        assert records[new_id]["excerpt"], new_id

    # A key that reads the shared memories only is not told what Finn's say.
    shared_key = stack.make_key("--namespace", namespace, "--perm", "read")
    finn_key = stack.make_key("--namespace", namespace, "--perm", "read", "--agent", "finn")
    finn_ids = {*finn[:2], clusters[frozenset(finn[:2])]}
    async with client(worker, shared_key) as shared, client(worker, finn_key) as own:
        seen = (await shared.get("/v1/consolidation/reports",
                                 params={"namespace": namespace})).json()["records"]
        assert not finn_ids & set(seen)
        assert set(vpn) <= set(seen)
        assert finn_ids <= set((await own.get("/v1/consolidation/reports",
                                              params={"namespace": namespace})
                                ).json()["records"])

    graph = (await http.get("/v1/graph", params={"namespace": namespace})).json()
    nodes = {node["record_id"]: node for node in graph["nodes"]}
    assert nodes[vpn[0]]["excerpt"] == VPN[0] and nodes[vpn[0]]["title"] is None
    assert nodes[clusters[frozenset(vpn)]]["review_state"] == "draft"
