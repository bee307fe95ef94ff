"""Sessions on the real stack (docs/sessions.md): wake → checkpoint → sleep, and the next
wake returns the handoff and a pack that finds what was kept (the read logged); a replay of
the session's events adds nothing; a bad session event ends in the dead-letter topic with its
reason while the next one is applied; a key bound to one agent cannot reach another agent's
session; the guide's Python runs as written."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from harness.kafka_io import TopicReader, produce, wait_caught_up
from harness.stack import Stack, Worker
from processors.memory.sessions import handoff_record_id
from tests.integration.conftest import event
from tests.integration.test_lifecycle import announced, changes_of
from tests.integration.test_write_endpoints import client, posted

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]

TASK = "fix the flaky login test"
SUMMARY = "The login test failed when the clock crossed midnight; froze it in the fixture."
NEXT_STEPS = ["Remove the retry decorator from test_login", "Watch CI for a week"]


@pytest.fixture(scope="session")
async def sessions_dlq(stack: Stack) -> AsyncIterator[TopicReader]:
    async with TopicReader(stack.broker.bootstrap, "sessions.events.dlq") as reader:
        yield reader


async def ledger(http: httpx.AsyncClient, namespace: str, session_id: str,
                 events: int) -> dict[str, Any]:
    """The session's ledger once it holds `events` events."""
    for _ in range(200):
        answer = await http.get(f"/v1/sessions/{session_id}", params={"namespace": namespace})
        if answer.status_code == 200 and len(answer.json()["events"]) >= events:
            found: dict[str, Any] = answer.json()
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"session {session_id} never held {events} events: {answer.text}")


async def logged_reads(stack: Stack, namespace: str, route: str) -> set[str]:
    """The records the retrieval log holds for reads of `route`, once it holds any."""
    connection = await asyncpg.connect(stack.pg_dsn)
    try:
        for _ in range(100):
            rows = await connection.fetch(
                "SELECT record_id FROM memory_retrieval_log WHERE namespace = $1 AND route = $2",
                namespace, route)
            if rows:
                return {row["record_id"] for row in rows}
            await asyncio.sleep(0.1)
    finally:
        await connection.close()
    return set()


async def test_wake_checkpoint_sleep_and_the_next_wake_returns_the_handoff(
    stack: Stack, worker: Worker, updates: TopicReader, namespace: str,
) -> None:
    ann = stack.make_key("--namespace", namespace, "--perm", "read,write", "--agent", "ann")
    async with client(worker, ann) as http:
        await posted(http, "/v1/blocks/persona", {
            "namespace": namespace, "set": {"ROLE": "Keeps the login tests green"}})
        await wait_caught_up(stack.broker.bootstrap, worker.app_id, ["memory.events"])

        woke = await posted(http, "/v1/sessions/wake", {"namespace": namespace, "task": TASK})
        session_id = woke["session_id"]
        assert (woke["agent_id"], woke["task"], woke["handoff"]) == ("ann", TASK, None)
        core = woke["context"]["core"]
        assert [block["label"] for block in core["blocks"]] == ["persona"]
        assert core["blocks"][0]["text"] == "[ROLE] Keeps the login tests green"
        assert woke["context"]["query"] == TASK
        # Without a task a wake still answers the core blocks: the pack's core alone.
        bare = await posted(http, "/v1/sessions/wake", {"namespace": namespace})
        assert bare["context"]["core"] == core and bare["context"]["sections"] == {
            "planning": [], "history": [], "long_term": [], "documents": []}

        # A step waits for what became of the memories it writes: each stored, under the
        # record ids that hold them.
        checkpoint = await posted(http, f"/v1/sessions/{session_id}/checkpoint?wait=20", {
            "namespace": namespace, "memories": [
                {"text": "test_login reads the wall clock through utils.now().",
                 "memory_type": "lesson", "tags": ["tests"]},
                {"text": "CI runs every job in UTC.", "scope": "shared"}]}, status=200)
        assert [w["outcome"] for w in checkpoint["writes"]] == ["stored", "stored"]
        assert checkpoint["record_ids"] == [w["record_id"] for w in checkpoint["writes"]]
        answer = await http.post(f"/v1/sessions/{session_id}/sleep", headers={
            "Prefer": "wait=20"}, content=json.dumps({
                "namespace": namespace, "summary": SUMMARY, "next_steps": NEXT_STEPS}))
        assert answer.status_code == 200, answer.text
        slept = answer.json()
        handoff_id = slept["handoff_record_id"]
        assert handoff_id == handoff_record_id(namespace, slept["event_id"])
        (handoff_write,) = slept["writes"]
        assert (handoff_write["outcome"], handoff_write["record_id"]) == ("stored", handoff_id)
        written = [*checkpoint["record_ids"], handoff_id]
        for record_id in written:
            await announced(updates, record_id, [("created", 1)])

        shown = await ledger(http, namespace, session_id, 3)
        assert (shown["state"], shown["agent_id"], shown["handoff_record_id"]) == \
            ("asleep", "ann", handoff_id)
        assert [e["type"] for e in shown["events"]] == \
            ["session.woke", "session.checkpointed", "session.slept"]
        lesson = (await http.get(f"/v1/records/{written[0]}",
                                 params={"namespace": namespace})).json()["record"]
        assert (lesson["scope"], lesson["agent_id"], lesson["thread"], lesson["memory_type"]) \
            == ("personal", "ann", session_id, "lesson")

        again = await posted(http, "/v1/sessions/wake", {
            "namespace": namespace, "task": "how does test_login read the wall clock?"})
        handoff = again["handoff"]
        assert (handoff["record_id"], handoff["session_id"]) == (handoff_id, session_id)
        assert handoff["text"] == f"Summary: {SUMMARY}\n\nNext steps:\n- " + \
            "\n- ".join(NEXT_STEPS)
        assert handoff["title"] == f"Handoff: {TASK}"
        assert again["session_id"] != session_id
        # The pack for the task finds what the last session kept, and the read is logged.
        packed = [item["record_id"] for item in again["context"]["sections"]["long_term"]]
        assert written[0] in packed
        assert await logged_reads(stack, namespace, "/v1/sessions/wake") >= {written[0]}

    # The session's events, replayed as they were published, add nothing.
    async with TopicReader(stack.broker.bootstrap, "sessions.events") as topic:
        await topic.wait_for(lambda m: len([x for x in m if x.key == session_id.encode()]) >= 3)
        replay = [(m.key, m.value) for m in topic.messages if m.key == session_id.encode()]
    await produce(stack.broker.bootstrap, "sessions.events", replay)
    await wait_caught_up(stack.broker.bootstrap, worker.app_id,
                         ["sessions.events", "memory.events"])
    async with client(worker, ann) as http:
        assert len((await ledger(http, namespace, session_id, 3))["events"]) == 3
    await asyncio.sleep(1)
    for record_id in written:
        assert changes_of(updates.messages, record_id) == [("created", 1)]


async def test_a_bad_session_event_is_dead_lettered_and_the_next_one_applied(
    stack: Stack, worker: Worker, sessions_dlq: TopicReader, http: httpx.AsyncClient,
    namespace: str,
) -> None:
    cases = {
        "never woke": ("broken_reference", event("session.checkpointed", namespace, {
            "session_id": "s-never", "agent_id": "ann", "memories": [{"text": "orphan"}]})),
        "no agent": ("invalid_event", event("session.woke", namespace, {
            "session_id": "s-no-agent"})),
        "unknown type": ("unknown_type", event("session.dreamt", namespace, {
            "session_id": "s-dream", "agent_id": "ann"})),
        "cut short": ("malformed_json", b'{"event_id": "x", "type": "session.woke"'),
    }
    keys = {name: f"bad-{uuid.uuid4().hex[:8]}".encode() for name in cases}
    good = f"s-{uuid.uuid4().hex[:8]}"
    await produce(stack.broker.bootstrap, "sessions.events", [
        *((keys[name], value) for name, (_, value) in cases.items()),
        (good.encode(), event("session.woke", namespace, {"session_id": good,
                                                          "agent_id": "ann"}))])
    await sessions_dlq.wait_for(lambda m: {key for key in keys.values()} <= {x.key for x in m})
    for name, (reason, value) in cases.items():
        (letter,) = [m for m in sessions_dlq.messages if m.key == keys[name]]
        assert (letter.headers["dlq.reason"].decode(), letter.value) == (reason, value), name
    assert (await ledger(http, namespace, good, 1))["state"] == "awake"
    # The same over HTTP: refused 400 with the reason, nothing published.
    refused = await http.post(f"/v1/sessions/{good}/checkpoint", content=json.dumps({
        "namespace": namespace, "agent_id": "ann", "memories": []}).encode())
    assert (refused.status_code, refused.json()["reason"]) == (400, "invalid_event")
    too_long = await http.post(f"/v1/sessions/{good}/sleep", content=json.dumps({
        "namespace": namespace, "summary": "s" * 8000, "next_steps": ["more"]}).encode())
    assert (too_long.status_code, too_long.json()["reason"]) == (400, "invalid_event")
    # A step the worker dead-letters writes none of its memories: waited for, each answers
    # the step's dead letter and its reason, never an id.
    orphan = await http.post(f"/v1/sessions/s-{uuid.uuid4().hex[:8]}/checkpoint",
                             params={"wait": 20}, json={
                                 "namespace": namespace, "agent_id": "ann",
                                 "memories": [{"text": "The orphan step's memory."}]})
    assert orphan.status_code == 200, orphan.text
    (lost,) = orphan.json()["writes"]
    assert (lost["outcome"], lost["reason"], lost.get("record_id")) == (
        "dead_lettered", "broken_reference", None)
    assert orphan.json()["record_ids"] == []


async def test_a_key_bound_to_an_agent_never_reaches_another_agents_session(
    stack: Stack, worker: Worker, namespace: str,
) -> None:
    ann = stack.make_key("--namespace", namespace, "--perm", "read,write", "--agent", "ann")
    bob = stack.make_key("--namespace", namespace, "--perm", "read,write", "--agent", "bob")
    async with client(worker, ann) as as_ann, client(worker, bob) as as_bob:
        session_id = (await posted(as_ann, "/v1/sessions/wake", {
            "namespace": namespace, "task": TASK}))["session_id"]
        await ledger(as_ann, namespace, session_id, 1)
        missing = await as_bob.get("/v1/sessions/s-missing", params={"namespace": namespace})
        hidden = await as_bob.get(f"/v1/sessions/{session_id}",
                                  params={"namespace": namespace})
        assert (hidden.status_code, missing.status_code) == (404, 404)
        assert hidden.json()["error"] == missing.json()["error"].replace("s-missing",
                                                                         session_id)
        for step, body in (("checkpoint", {"memories": [{"text": "Bob was here."}]}),
                           ("sleep", {"summary": "Bob ended it."})):
            answer = await as_bob.post(f"/v1/sessions/{session_id}/{step}", content=json.dumps(
                {"namespace": namespace, **body}).encode())
            assert answer.status_code == 404, answer.text
        # Bob cannot wake as Ann, nor name Ann in a step.
        assert (await as_bob.post("/v1/sessions/wake", content=json.dumps({
            "namespace": namespace, "agent_id": "ann"}).encode())).status_code == 403
        assert (await as_bob.post(f"/v1/sessions/{session_id}/sleep", content=json.dumps({
            "namespace": namespace, "agent_id": "ann", "summary": "x"}).encode())
        ).status_code == 404
        assert [e["type"] for e in (await ledger(as_ann, namespace, session_id, 1))["events"]] \
            == ["session.woke"]


def test_the_python_of_the_sessions_guide_runs_as_written(
    stack: Stack, worker: Worker, namespace: str, tmp_path: Path,
) -> None:
    """docs/sessions.md's Python, with a key bound to an agent, configured by the environment
    alone as a user runs it."""
    (example,) = re.findall(r"```python\n(.*?)```",
                            (REPO_ROOT / "docs" / "sessions.md").read_text(), re.S)
    environment = {name: value for name, value in os.environ.items()
                   if not name.startswith("MEMSTREAM_")}
    environment.update(
        HOME=str(tmp_path), MEMSTREAM_URL=worker.base_url, MEMSTREAM_NAMESPACE=namespace,
        MEMSTREAM_API_KEY=stack.make_key("--namespace", namespace, "--perm", "read,write",
                                         "--agent", "ann"))
    done = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, env=environment,
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "first session\n"), done.stderr
