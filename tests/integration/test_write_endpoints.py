"""Writes over HTTP on the real stack: each write route publishes the event a Kafka producer
would, which the worker applies like any other; what the intake would dead-letter is refused
400 with the same reason, and the key decides who may write what, as whom."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from harness.kafka_io import Received, TopicReader, produce, wait_caught_up
from harness.stack import Stack, Worker
from memstream_client.ids import digest_record_id, memory_record_id
from tests.integration.conftest import event
from tests.integration.test_lifecycle import announced, history, search_ids

pytestmark = pytest.mark.integration

TEXT = "Deploys of the billing service need the office VPN up."
NEW_TEXT = "Deploys of the billing service go through the bastion host, no VPN."


def key_id_of(token: str) -> str:
    return token.split("_")[1]


def client(worker: Worker, token: str | None) -> httpx.AsyncClient:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return httpx.AsyncClient(base_url=worker.base_url, headers=headers, timeout=20)


async def posted(http: httpx.AsyncClient, route: str, body: Any, status: int = 202,
                 wait_s: float | None = None) -> dict[str, Any]:
    """The answer of a POST; with `wait_s`, of a write that waits that long for its outcome
    (200 once decided)."""
    answer = await http.post(route, content=json.dumps(body).encode(),
                             params=None if wait_s is None else {"wait": wait_s})
    assert answer.status_code == status, answer.text
    found: dict[str, Any] = answer.json()
    return found


async def stored(http: httpx.AsyncClient, body: dict[str, Any]) -> str:
    """The record a memory write stored, as its answer says once decided."""
    answer = await posted(http, "/v1/memories", body, status=200, wait_s=WAIT_S)
    assert answer["outcome"] == "stored", answer
    record_id: str = answer["record_id"]
    return record_id


# Long enough for a loaded worker to decide a write.
WAIT_S = 20


async def test_a_posted_memory_answers_the_record_it_was_stored_as(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient,
    namespace: str,
) -> None:
    # Not waited for: accepted, pending, and where its outcome will be read.
    accepted = await http.post("/v1/memories", json={
        "namespace": namespace, "text": TEXT, "tags": ["ops"], "memory_type": "lesson"})
    assert accepted.status_code == 202, accepted.text
    answer = accepted.json()
    assert (answer["topic"], answer["outcome"], answer.get("record_id")) == (
        "memory.events", "pending", None)
    assert accepted.headers["Location"] == answer["outcome_url"] == (
        f"/v1/writes/{answer['event_id']}?namespace={namespace}")
    decided = await http.get(f"{answer['outcome_url']}&wait={WAIT_S}")
    assert decided.status_code == 200, decided.text
    outcome = decided.json()
    record_id = outcome["record_id"]
    assert (outcome["outcome"], outcome["version"]) == ("stored", 1)
    assert record_id == memory_record_id(namespace, answer["event_id"])
    await announced(updates, record_id, [("created", 1)])

    assert await search_ids(http, namespace, "office VPN") == [record_id]
    shown = (await http.get(f"/v1/records/{record_id}", params={"namespace": namespace})).json()
    assert (shown["record"]["text"], shown["record"]["tags"], shown["record"]["memory_type"]) \
        == (TEXT, ["ops"], "lesson")
    (version,) = await history(http, namespace, record_id)
    assert version["actor"] == f"http:{key_id_of(stack.operator_key)}"

    # Posted again with its event_id, waiting (`Prefer: wait`): the same event, applied
    # once, answered as decided at once.
    again = await http.post("/v1/memories", json={
        "namespace": namespace, "text": TEXT, "event_id": answer["event_id"]},
        headers={"Prefer": "wait=10"})
    assert again.status_code == 200, again.text
    assert (again.json()["outcome"], again.json()["record_id"]) == ("stored", record_id)
    await wait_caught_up(stack.broker.bootstrap, worker.app_id, ["memory.events"])
    assert len(await history(http, namespace, record_id)) == 1


async def test_update_review_deprecate_and_restore_over_http(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient,
    namespace: str,
) -> None:
    key_id = key_id_of(stack.operator_key)
    record_id = await stored(http, {"namespace": namespace, "text": TEXT, "tags": ["ops"]})
    await announced(updates, record_id, [("created", 1)])

    # Approved, so protected: the update waits as a pending diff, named by its event_id.
    update = await posted(http, f"/v1/memories/{record_id}/update", {
        "namespace": namespace, "expected_version": 1, "text": NEW_TEXT,
        "tags": ["ops", "billing"]}, status=200, wait_s=WAIT_S)
    assert (update["outcome"], update["record_id"], update["diff_id"], update["version"]) == (
        "proposed", record_id, update["event_id"], 1)
    await announced(updates, record_id, [("created", 1), ("proposed", 1)])
    pending = (await http.get("/v1/pending-diffs", params={"namespace": namespace})).json()
    assert [(d["diff_id"], d["proposed"]["text"], d["proposer"])
            for d in pending["pending_diffs"]] == [(update["event_id"], NEW_TEXT,
                                                    f"http:{key_id}")]

    # The reviewer is the key, whatever the body says.
    review = await posted(http, "/v1/reviews", {
        "namespace": namespace, "decision": "approve", "record_id": record_id,
        "diff_id": update["event_id"], "reviewer": "somebody-else"})
    # Not waited for: it names the record the review is for.
    assert (review["outcome"], review["record_id"]) == ("pending", record_id)
    await announced(updates, record_id, [("created", 1), ("proposed", 1), ("approved", 2)])
    assert await search_ids(http, namespace, "bastion") == [record_id]

    await posted(http, f"/v1/memories/{record_id}/deprecate", {
        "namespace": namespace, "reason": "billing left the VPN", "expected_version": 2})
    await announced(updates, record_id, [("created", 1), ("proposed", 1), ("approved", 2),
                                         ("deprecated", 3)])
    await posted(http, f"/v1/memories/{record_id}/restore", {
        "namespace": namespace, "version": 1})
    await announced(updates, record_id, [("created", 1), ("proposed", 1), ("approved", 2),
                                         ("deprecated", 3), ("restored", 4)])

    versions = await history(http, namespace, record_id)
    assert [(v["version"], v["change"], v["actor"]) for v in versions] == [
        (1, "created", f"http:{key_id}"),
        (2, "approved", f"key:{key_id}"),
        (3, "deprecated", f"http:{key_id}"),
        (4, "restored", f"http:{key_id}"),
    ]
    assert versions[1]["text"] == NEW_TEXT and versions[2]["reason"] == "billing left the VPN"
    assert versions[3]["text"] == TEXT

    # A record the namespace lacks is answered up front.
    missing = await http.post("/v1/memories/mem_nowhere/update", json={
        "namespace": namespace, "expected_version": 1, "text": "x"})
    assert missing.status_code == 404, missing.text


async def test_posted_run_events_become_the_runs_digest(
    worker: Worker, updates: TopicReader, http: httpx.AsyncClient, namespace: str,
) -> None:
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    started = await posted(http, "/v1/runs/events", {
        "type": "run.started", "namespace": namespace,
        "payload": {"run_id": run_id, "intent": "warm the user cache", "agent": "finn"}})
    assert started["run_id"] == run_id
    steps: list[tuple[str, dict[str, Any]]] = [
        ("run.step", {"kind": "note", "text": "Loaded users lazily."}),
        ("run.artifact", {"kind": "patch", "ref": f"artifacts/{run_id}/lazy.diff"}),
        ("run.finished", {"status": "succeeded", "summary": "Cache warmed on first read.",
                          "commits": ["abc123"]}),
    ]
    for event_type, payload in steps:
        await posted(http, "/v1/runs/events", {"type": event_type, "namespace": namespace,
                                               "payload": {"run_id": run_id, **payload}})
    digest_id = digest_record_id(namespace, run_id)
    await updates.wait_for(lambda messages: any(
        json.loads(m.value)["record_id"] == digest_id for m in messages), 60)
    digest = (await http.get(f"/v1/records/{digest_id}", params={"namespace": namespace}))
    assert digest.status_code == 200, digest.text
    text = digest.json()["record"]["text"]
    assert "warm the user cache" in text and f"artifacts/{run_id}/lazy.diff" in text


async def test_a_posted_block_edit_is_applied(
    stack: Stack, worker: Worker, http: httpx.AsyncClient, namespace: str,
) -> None:
    answer = await posted(http, "/v1/blocks/persona", {
        "namespace": namespace, "agent_id": "finn", "set": {"IDENTITY": "Release captain"}})
    assert (answer["agent_id"], answer["label"]) == ("finn", "persona")
    await wait_caught_up(stack.broker.bootstrap, worker.app_id, ["memory.events"])
    shown = (await http.get("/v1/blocks/persona",
                            params={"namespace": namespace, "agent_id": "finn"})).json()
    assert (shown["version"], shown["text"]) == (1, "[IDENTITY] Release captain")


# What a route refuses, given the namespace: the body posted, the same event as bytes
# straight on Kafka, and the reason both give.
REFUSALS: list[tuple[str, Callable[[str], Any], Callable[[str], bytes], str]] = [
    ("a list", lambda ns: [1, 2], lambda ns: b"[1, 2]", "not_an_object"),
    ("not JSON", lambda ns: "{", lambda ns: b"{", "malformed_json"),
    ("no namespace", lambda ns: {"text": "No namespace."},
     lambda ns: event("memory.write", "", {"text": "No namespace."}), "missing_namespace"),
    ("empty text", lambda ns: {"namespace": ns, "text": ""},
     lambda ns: event("memory.write", ns, {"text": ""}), "invalid_event"),
    ("U+0000 in a tag", lambda ns: {"namespace": ns, "text": "t", "tags": ["ops\x00"]},
     lambda ns: event("memory.write", ns, {"text": "t", "tags": ["ops\x00"]}), "invalid_text"),
    ("an unknown memory type", lambda ns: {"namespace": ns, "text": "t", "memory_type": "gossip"},
     lambda ns: event("memory.write", ns, {"text": "t", "memory_type": "gossip"}),
     "invalid_event"),
    ("personal without owner", lambda ns: {"namespace": ns, "text": "t", "scope": "personal"},
     lambda ns: event("memory.write", ns, {"text": "t", "scope": "personal"}),
     "invalid_event"),
    ("oversized", lambda ns: {"namespace": ns, "text": "x" * 70_000},
     lambda ns: event("memory.write", ns, {"text": "x" * 70_000}), "oversized"),
]


async def test_what_the_intake_refuses_is_refused_with_its_dead_letter_reason(
    stack: Stack, worker: Worker, memory_dlq: TopicReader, runs_dlq: TopicReader,
    http: httpx.AsyncClient, namespace: str,
) -> None:
    keys = {name: f"{namespace}-{n}".encode() for n, (name, *_) in enumerate(REFUSALS)}
    answers: dict[str, dict[str, Any]] = {}
    for name, body, _, reason in REFUSALS:
        sent = body(namespace)
        answer = await http.post("/v1/memories", content=sent if isinstance(sent, str)
                                 else json.dumps(sent).encode())
        assert answer.status_code == 400, (name, answer.text)
        answers[name] = answer.json()
        assert answers[name]["reason"] == reason, (name, answers[name])

    # The same events straight to Kafka are dead-lettered for the same reasons.
    await produce(stack.broker.bootstrap, "memory.events",
                  [(keys[name], value(namespace)) for name, _, value, _ in REFUSALS])
    await memory_dlq.wait_for(lambda messages: set(keys.values()) <= {m.key for m in messages})
    letters: dict[bytes, Received] = {m.key: m for m in memory_dlq.messages if m.key}
    for name, *_ in REFUSALS:
        letter = letters[keys[name]]
        assert letter.headers["dlq.reason"].decode() == answers[name]["reason"], name
        if answers[name]["reason"] in ("invalid_event", "invalid_text"):
            assert letter.headers["dlq.error"].decode() == answers[name]["error"], name

    # A run event of a type the run ledger does not take.
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    answer = await http.post("/v1/runs/events", json={
        "type": "run.exploded", "namespace": namespace, "payload": {"run_id": run_id}})
    assert (answer.status_code, answer.json()["reason"]) == (400, "unknown_type")
    await produce(stack.broker.bootstrap, "runs.events",
                  [(run_id.encode(), event("run.exploded", namespace, {"run_id": run_id}))])
    await runs_dlq.wait_for(lambda messages: any(m.key == run_id.encode() for m in messages))
    (letter,) = [m for m in runs_dlq.messages if m.key == run_id.encode()]
    assert letter.headers["dlq.reason"] == b"unknown_type"
    assert letter.headers["dlq.error"].decode() == answer.json()["error"]

    # An envelope field in the body is the envelope's, not a payload field.
    answer = await http.post("/v1/memories", json={"namespace": namespace, "text": "t",
                                                   "occurred_at": "2026-11-01T10:00:00Z"})
    assert (answer.status_code, answer.json()["reason"]) == (400, "invalid_event")
    assert (await http.get("/v1/memories")).status_code == 405


async def test_the_key_decides_who_writes_what_as_whom(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient,
    namespace: str,
) -> None:
    memory = {"namespace": namespace, "text": "Ann prefers short release notes."}
    async with client(worker, None) as anonymous:
        assert (await anonymous.post("/v1/memories", json=memory)).status_code == 401
    reader = stack.make_key("--namespace", namespace, "--perm", "read")
    async with client(worker, reader) as read_only:
        assert (await read_only.post("/v1/memories", json=memory)).status_code == 403
        assert (await read_only.post("/v1/runs/events", json={
            "type": "run.started", "namespace": namespace,
            "payload": {"run_id": "r"}})).status_code == 403
    writer = stack.make_key("--namespace", namespace, "--perm", "write")
    async with client(worker, writer) as write_only:
        assert (await write_only.post("/v1/memories", json={
            **memory, "namespace": f"{namespace}-other"})).status_code == 403
        assert (await write_only.post("/v1/reviews", json={
            "namespace": namespace, "decision": "approve",
            "record_id": "mem_x"})).status_code == 403, "reviews need review"

    ann = stack.make_key("--namespace", namespace, "--perm", "read,write", "--agent", "ann")
    bob = stack.make_key("--namespace", namespace, "--perm", "read,write,review",
                         "--agent", "bob")
    async with client(worker, ann) as as_ann, client(worker, bob) as as_bob:
        assert (await as_ann.post("/v1/memories", json={
            **memory, "scope": "personal", "agent_id": "bob"})).status_code == 403
        assert (await as_ann.post("/v1/blocks/persona", json={
            "namespace": namespace, "agent_id": "bob",
            "set": {"IDENTITY": "Not Bob"}})).status_code == 403

        # No agent_id: the key's agent, so Ann's personal vault.
        record_id = await stored(as_ann, {**memory, "scope": "personal"})
        await announced(updates, record_id, [("created", 1)])
        shown = (await http.get(f"/v1/records/{record_id}",
                                params={"namespace": namespace})).json()["record"]
        assert (shown["scope"], shown["agent_id"]) == ("personal", "ann")
        assert await search_ids(as_ann, namespace, "release notes") == [record_id]
        assert await search_ids(as_bob, namespace, "release notes") == []

        # Bob cannot tell Ann's memory from none.
        for route, body in [
            (f"/v1/memories/{record_id}/deprecate", {"namespace": namespace, "reason": "x"}),
            (f"/v1/memories/{record_id}/update",
             {"namespace": namespace, "expected_version": 1, "text": "Bob's now."}),
            ("/v1/reviews", {"namespace": namespace, "decision": "reject",
                             "record_id": record_id}),
        ]:
            answer = await as_bob.post(route, json=body)
            assert answer.status_code == 404, (route, answer.text)
            assert answer.json() == {
                "error": f"no record {record_id!r} in {namespace!r}"}
