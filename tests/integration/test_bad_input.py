"""Nothing stops the stream: a corpus of bad events, each followed by a valid event on the
same key, on the real stack. Every bad event is dead-lettered once with its reason (or, for
U+0000 and lone surrogates in prose, stored cleaned with the change recorded), every valid
event after it becomes searchable, and the worker never restarts."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx
import pytest
from aiokafka import AIOKafkaProducer

from harness.kafka_io import Received, TopicReader, produce
from harness.stack import Stack, Worker
from memstream_client.ids import digest_record_id, memory_record_id
from processors.memory.sessions import handoff_record_id
from tests.integration.conftest import updated_ids

pytestmark = pytest.mark.integration

NOW = datetime.now(UTC).isoformat()


def envelope(event_type: str, namespace: str, payload: Any, **fields: Any) -> dict[str, Any]:
    return {"event_id": uuid.uuid4().hex, "type": event_type, "namespace": namespace,
            "occurred_at": NOW, "producer": "bad-input-test", "payload": payload, **fields}


def dumped(document: Any) -> bytes:
    # ensure_ascii: U+0000 and lone surrogates travel as \u escapes, as producers send them.
    return json.dumps(document).encode()


@dataclass(frozen=True)
class Case:
    name: str
    # The message value (None: a tombstone), given the namespace (or run id) it is keyed by.
    value: Callable[[str], bytes | None]
    # The dead letter's reason, or None when the event is stored (cleaned).
    reason: str | None


def memory(text: str = "A valid memory.", **payload: Any) -> Callable[[str], bytes]:
    return lambda ns: dumped(envelope("memory.write", ns, {"text": text, **payload}))


def memory_with(**fields: Any) -> Callable[[str], bytes]:
    """A memory.write whose envelope fields (or payload) are replaced by `fields`."""
    return lambda ns: dumped({**envelope("memory.write", ns, {"text": "t"}), **fields})


def change(event_type: str, **payload: Any) -> Callable[[str], bytes]:
    """A lifecycle event or block edit with this payload."""
    return lambda ns: dumped(envelope(event_type, ns, payload))


def nested(depth: int) -> Callable[[str], bytes]:
    return lambda ns: (b'{"event_id": "deep", "type": "memory.write", "namespace": "'
                       + ns.encode() + b'", "payload": ' + b"[" * depth + b"]" * depth + b"}")


MEMORY_CASES = [
    # Encodings and text Postgres cannot store.
    Case("nul in text (prose: cleaned)", memory("deploy\x00 needs the VPN"), None),
    Case("nul in title (prose: cleaned)", memory(title="VPN\x00"), None),
    Case("lone surrogate in text (prose: cleaned)", memory("emoji cut \ud83d in half"), None),
    Case("nul in a tag", memory(tags=["ops\x00"]), "invalid_text"),
    Case("nul in source_ref", memory(source_ref="wiki\x00#vpn"), "invalid_text"),
    Case("nul in event_id", memory_with(event_id="e\x00"), "invalid_text"),
    Case("nul in producer", memory_with(producer="orchestrator\x00"), "invalid_text"),
    Case("lone surrogate in agent_id",
         memory(scope="personal", agent_id="ann\udc80"), "invalid_text"),
    Case("invalid UTF-8", lambda ns: b'{"type": "memory.write", "x": "\xff\xfe"}',
         "malformed_json"),
    Case("UTF-16 JSON (auto-detected, stored)",
         lambda ns: json.dumps(envelope("memory.write", ns, {"text": "Sixteen bits."})
                               ).encode("utf-16"), None),
    # Sizes, nesting, numbers.
    Case("5,000 arrays deep", nested(5000), "malformed_json"),
    Case("a 5,000-digit number",
         lambda ns: dumped(envelope("memory.write", ns, {"text": "t"}))[:-1]
         + b', "n": ' + b"7" * 5000 + b"}", "malformed_json"),
    Case("NaN", lambda ns: dumped(envelope("memory.write", ns, {"text": "t"}))[:-1]
         + b', "n": NaN}', "malformed_json"),
    Case("oversized", memory("x" * 70_000), "oversized"),
    Case("text over its limit", memory("y" * 8001), "invalid_event"),
    Case("empty value", lambda ns: b"", "malformed_json"),
    Case("tombstone", lambda ns: None, "malformed_json"),
    Case("not JSON", lambda ns: b"{this is not json", "malformed_json"),
    # Shapes and types.
    Case("an array", lambda ns: b"[1, 2, 3]", "not_an_object"),
    Case("a string", lambda ns: b'"memory.write"', "not_an_object"),
    Case("unknown type", lambda ns: dumped(envelope("memory.explode", ns, {"text": "t"})),
         "unknown_type"),
    Case("type is a number", memory_with(type=7), "unknown_type"),
    Case("a run event on memory.events",
         lambda ns: dumped(envelope("run.started", ns, {"run_id": "r"})), "unknown_type"),
    Case("no namespace",
         lambda ns: dumped({k: v for k, v in envelope("memory.write", ns, {"text": "t"}).items()
                            if k != "namespace"}), "missing_namespace"),
    Case("namespace with spaces", memory_with(namespace="team a"), "invalid_event"),
    Case("payload is null", memory_with(payload=None), "invalid_event"),
    Case("empty text", memory(""), "invalid_event"),
    Case("text is a number", memory_with(payload={"text": 42}), "invalid_event"),
    Case("tags is a string", memory(tags="ops"), "invalid_event"),
    Case("21 tags", memory(tags=[f"t{n}" for n in range(21)]), "invalid_event"),
    Case("unknown memory type", memory(memory_type="gossip"), "invalid_event"),
    Case("personal without owner", memory(scope="personal"), "invalid_event"),
    Case("an extra envelope field", memory_with(priority="high"), "invalid_event"),
    Case("an extra payload field", memory(priority="high"), "invalid_event"),
    Case("schema version 2", memory_with(schema_version=2), "invalid_event"),
    Case("event_id of 201 characters", memory_with(event_id="e" * 201), "invalid_event"),
    # Dates.
    Case("a time without offset", memory_with(occurred_at="2026-11-01T10:00:00"),
         "invalid_event"),
    Case("a date that does not exist", memory_with(occurred_at="2026-02-30T10:00:00Z"),
         "invalid_event"),
    Case("a time with no UTC form", memory_with(occurred_at="9999-12-31T23:00:00-14:00"),
         "invalid_event"),
    Case("expires in year 0", memory(expires_at="0001-01-01T00:00:00+01:00"),
         "invalid_event"),
    # References.
    Case("11 related ids", memory(related_ids=[f"mem_{n}" for n in range(11)]),
         "invalid_event"),
    Case("a related id that does not exist", memory(related_ids=["mem_nowhere"]),
         "broken_reference"),
    # Lifecycle events and block edits.
    Case("an update of a record the namespace lacks",
         change("memory.update", record_id="mem_nowhere", expected_version=1, text="x"),
         "broken_reference"),
    Case("an update without expected_version",
         change("memory.update", record_id="mem_x", text="x"), "invalid_event"),
    Case("an update that sets nothing",
         change("memory.update", record_id="mem_x", expected_version=1), "invalid_event"),
    Case("an update whose fields are null",
         change("memory.update", record_id="mem_x", expected_version=1, tags=None,
                title=None), "invalid_event"),
    Case("a deprecation without a reason", change("memory.deprecate", record_id="mem_x"),
         "invalid_event"),
    Case("a restore to version 0", change("memory.restore", record_id="mem_x", version=0),
         "invalid_event"),
    Case("a review naming a record and a block",
         change("memory.review", record_id="mem_x", block={"agent_id": "a", "label": "human"},
                decision="approve", reviewer="ana", diff_id="d"), "invalid_event"),
    Case("a block review without its diff",
         change("memory.review", block={"agent_id": "a", "label": "human"},
                decision="approve", reviewer="ana"), "invalid_event"),
    Case("a review of a diff nobody proposed",
         change("memory.review", block={"agent_id": "a", "label": "human"},
                decision="approve", reviewer="ana", diff_id="nope"), "broken_reference"),
    Case("a block field in lower case",
         change("memory.block", agent_id="a", label="human", set={"task": "x"}),
         "invalid_event"),
    Case("a block field both set and appended to",
         change("memory.block", agent_id="a", label="human", set={"TASK": "x"},
                append={"TASK": ["y"]}), "invalid_event"),
    Case("nul in a block field",
         change("memory.block", agent_id="a", label="human", set={"TASK": "x\x00"}),
         "invalid_text"),
]


def run_event(event_type: str, **payload: Any) -> Callable[[str], bytes]:
    return lambda run_id: dumped(envelope(event_type, RUNS_NAMESPACE,
                                          {"run_id": run_id, **payload}))


RUNS_NAMESPACE = f"bad-runs-{uuid.uuid4().hex[:8]}"
TRACE = "Traceback (most recent call last):\n  File \"app.py\", line 3, in main\nKeyError: 'x'"

# Each run case is keyed by a run id of its own; the valid events after it start and finish
# that run, which then has a digest.
RUN_CASES = [
    Case("nul in a run's error text (prose: cleaned)",
         run_event("run.step", kind="error", error=TRACE + "\x00\x00"), None),
    Case("lone surrogate in step text (prose: cleaned)",
         run_event("run.step", kind="note", text="half an emoji \ud83d"), None),
    Case("nul in a commit", run_event("run.finished", status="succeeded", commits=["ab\x00c"]),
         "invalid_text"),
    Case("nul in the run id",
         lambda run_id: dumped(envelope("run.started", RUNS_NAMESPACE,
                                        {"run_id": run_id + "\x00"})), "invalid_text"),
    Case("a step of an unknown kind", run_event("run.step", kind="dance"), "invalid_event"),
    Case("an error step without its error", run_event("run.step", kind="error"),
         "invalid_event"),
    Case("attempt out of range", run_event("run.step", kind="retry", attempt=10**6),
         "invalid_event"),
    Case("a status nobody knows", run_event("run.finished", status="exploded"),
         "invalid_event"),
    Case("201 commits",
         run_event("run.finished", status="succeeded", commits=[f"c{n}" for n in range(201)]),
         "invalid_event"),
    Case("a traceback over its limit",
         run_event("run.finished", status="failed", error="E" * 32001), "invalid_event"),
    Case("a memory event on runs.events",
         lambda run_id: dumped(envelope("memory.write", RUNS_NAMESPACE, {"text": "t"})),
         "unknown_type"),
    Case("5,000 objects deep",
         lambda run_id: b'{"a": ' * 5000 + b"1" + b"}" * 5000, "malformed_json"),
]

# Before the run's own run.started: the ledger has no such run yet.
ORDERING_CASES = [
    Case("a step before its run started", run_event("run.step", kind="note", text="early"),
         "broken_reference"),
    Case("a run that finished without starting", run_event("run.finished", status="failed"),
         "broken_reference"),
]


SESSIONS_NAMESPACE = "bad-sessions"


def session_event(event_type: str, agent: str = "ann", **payload: Any
                  ) -> Callable[[str], bytes]:
    return lambda session_id: dumped(envelope(event_type, SESSIONS_NAMESPACE, {
        "session_id": session_id, "agent_id": agent, **payload}))


# Each after a valid wake of its session, and before a valid sleep.
SESSION_CASES = [
    Case("a checkpoint of no memories", session_event("session.checkpointed", memories=[]),
         "invalid_event"),
    Case("21 memories at one checkpoint", session_event(
        "session.checkpointed", memories=[{"text": f"m{n}"} for n in range(21)]),
         "invalid_event"),
    Case("nul in a checkpoint's memory", session_event(
        "session.checkpointed", memories=[{"text": "half\x00"}]), "invalid_text"),
    Case("a sleep without its summary", session_event("session.slept"), "invalid_event"),
    Case("a handoff longer than a memory", session_event(
        "session.slept", summary="s" * 8000, next_steps=["one more"]), "invalid_event"),
    Case("a second wake", session_event("session.woke"), "invalid_transition"),
    Case("another agent's step", session_event("session.slept", agent="bob", summary="mine"),
         "invalid_transition"),
    Case("nul in the session id", lambda session_id: dumped(envelope(
        "session.woke", SESSIONS_NAMESPACE, {"session_id": session_id + "\x00",
                                             "agent_id": "ann"})), "invalid_text"),
    Case("a run event on sessions.events", lambda session_id: dumped(envelope(
        "run.started", SESSIONS_NAMESPACE, {"run_id": session_id})), "unknown_type"),
    Case("a checkpoint before its session woke (sent first)", session_event(
        "session.checkpointed", memories=[{"text": "early"}]), "broken_reference"),
]


async def produce_values(bootstrap: str, topic: str,
                         messages: list[tuple[bytes, bytes | None]]) -> None:
    """Like harness.kafka_io.produce, but a value may be None (a tombstone)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for key, value in messages:
            await producer.send_and_wait(topic, value, key=key)
    finally:
        await producer.stop()


def letters_of(messages: list[Received], key: bytes) -> list[Received]:
    return [message for message in messages if message.key == key]


async def crashes(http: httpx.AsyncClient) -> float:
    text = (await http.get("/metrics")).text
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith("memstream_agent_crashes_total{"))


async def test_no_bad_memory_event_stops_the_valid_one_behind_it(
    stack: Stack, worker: Worker, updates: TopicReader, memory_dlq: TopicReader,
    http: httpx.AsyncClient,
) -> None:
    pid = worker.process.pid if worker.process else None
    crashes_before = await crashes(http)
    namespaces = {case.name: f"bad-{n}-{uuid.uuid4().hex[:8]}"
                  for n, case in enumerate(MEMORY_CASES)}
    sent: dict[str, bytes | None] = {}
    followers: dict[str, str] = {}
    messages: list[tuple[bytes, bytes | None]] = []
    for case in MEMORY_CASES:
        namespace = namespaces[case.name]
        sent[case.name] = case.value(namespace)
        follower = envelope("memory.write", namespace,
                            {"text": f"The valid memory after {case.name}."})
        followers[case.name] = memory_record_id(namespace, follower["event_id"])
        messages += [(namespace.encode(), sent[case.name]), (namespace.encode(),
                                                            dumped(follower))]
    await produce_values(stack.broker.bootstrap, "memory.events", messages)

    # Every valid event behind a bad one is announced (indexed first, so searchable).
    await updates.wait_for(lambda m: set(followers.values()) <= {
        record_id for namespace in namespaces.values()
        for record_id in updated_ids(m, namespace)}, 60)
    for case in MEMORY_CASES[:3]:
        answer = await http.get("/v1/search", params={
            "namespace": namespaces[case.name], "query": f"valid memory after {case.name}",
            "min_score": "0.3", "limit": "10"})
        assert followers[case.name] in [hit["record_id"] for hit in answer.json()["hits"]]

    # Each bad event is dead-lettered once, as its original bytes, with its reason.
    dead = [case for case in MEMORY_CASES if case.reason is not None]
    await memory_dlq.wait_for(lambda m: all(
        letters_of(m, namespaces[case.name].encode()) for case in dead), 60)
    for case in dead:
        (letter,) = letters_of(memory_dlq.messages, namespaces[case.name].encode())
        assert letter.headers["dlq.reason"].decode() == case.reason, case.name
        assert letter.value == (sent[case.name] or b"")[:900 * 1024], case.name
        assert letter.headers["dlq.error"], case.name

    # The cleaned ones are stored, saying what was cleaned; nothing else of the bad ones is.
    connection = await asyncpg.connect(stack.pg_dsn)
    try:
        rows = await connection.fetch(
            "SELECT namespace, text, title, body FROM records WHERE namespace = ANY($1::text[])"
            " AND text NOT LIKE 'The valid memory after%'", list(namespaces.values()))
    finally:
        await connection.close()
    stored = {row["namespace"]: row for row in rows}
    cleaned = [case for case in MEMORY_CASES if case.reason is None]
    assert set(stored) == {namespaces[case.name] for case in cleaned}
    assert stored[namespaces["nul in text (prose: cleaned)"]]["text"] == "deploy needs the VPN"
    assert json.loads(stored[namespaces["nul in text (prose: cleaned)"]]["body"])[
        "sanitized"] == {"text": 1}
    assert stored[namespaces["lone surrogate in text (prose: cleaned)"]]["text"] == \
        "emoji cut \ufffd in half"

    # The worker never restarted, and none of its agents crashed.
    assert worker.process is not None and worker.process.poll() is None
    assert worker.process.pid == pid
    assert await crashes(http) == crashes_before


async def test_no_bad_run_event_stops_the_run_behind_it(
    stack: Stack, worker: Worker, updates: TopicReader, runs_dlq: TopicReader,
    http: httpx.AsyncClient,
) -> None:
    crashes_before = await crashes(http)
    runs = {case.name: f"run-{n}-{uuid.uuid4().hex[:8]}"
            for n, case in enumerate(RUN_CASES + ORDERING_CASES)}
    sent: dict[str, bytes | None] = {}
    messages: list[tuple[bytes, bytes]] = []
    for case in ORDERING_CASES:
        run_id = runs[case.name]
        sent[case.name] = case.value(run_id)
        messages.append((run_id.encode(), sent[case.name] or b""))
    for case in RUN_CASES + ORDERING_CASES:
        run_id = runs[case.name]
        if case in RUN_CASES:
            # A valid start first, so that only the event itself can be at fault.
            messages.append((run_id.encode(), run_event("run.started", intent=case.name)(
                run_id)))
            sent[case.name] = case.value(run_id)
            messages.append((run_id.encode(), sent[case.name] or b""))
        else:
            messages.append((run_id.encode(), run_event("run.started", intent=case.name)(
                run_id)))
        messages.append((run_id.encode(), run_event("run.finished", status="succeeded",
                                                    commits=["c0ffee"])(run_id)))
    await produce(stack.broker.bootstrap, "runs.events", messages)

    digests = {digest_record_id(RUNS_NAMESPACE, run_id) for run_id in runs.values()}
    await updates.wait_for(
        lambda m: digests <= set(updated_ids(m, RUNS_NAMESPACE)), 60)

    dead = [case for case in RUN_CASES + ORDERING_CASES if case.reason is not None]
    await runs_dlq.wait_for(lambda m: all(
        letters_of(m, runs[case.name].encode()) for case in dead), 60)
    for case in dead:
        (letter,) = letters_of(runs_dlq.messages, runs[case.name].encode())
        assert letter.headers["dlq.reason"].decode() == case.reason, case.name
        assert letter.value == sent[case.name], case.name

    connection = await asyncpg.connect(stack.pg_dsn)
    try:
        cleaned = await connection.fetchrow(
            "SELECT payload, sanitized FROM run_events WHERE namespace = $1 AND run_id = $2"
            " AND type = 'run.step'", RUNS_NAMESPACE,
            runs["nul in a run's error text (prose: cleaned)"])
    finally:
        await connection.close()
    assert cleaned is not None
    assert json.loads(cleaned["payload"])["error"] == TRACE
    assert json.loads(cleaned["sanitized"]) == {"error": 2}
    assert worker.process is not None and worker.process.poll() is None
    assert await crashes(http) == crashes_before


async def test_no_bad_session_event_stops_the_session_behind_it(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient,
) -> None:
    crashes_before = await crashes(http)
    sessions = {case.name: f"ses-{n}-{uuid.uuid4().hex[:8]}"
                for n, case in enumerate(SESSION_CASES)}
    sent = {case.name: case.value(sessions[case.name]) for case in SESSION_CASES}
    early = SESSION_CASES[-1]
    messages = [(sessions[early.name].encode(), sent[early.name])]
    handoffs = []
    for case in SESSION_CASES:
        session_id = sessions[case.name]
        sleep = envelope("session.slept", SESSIONS_NAMESPACE, {
            "session_id": session_id, "agent_id": "ann", "summary": f"After {case.name}."})
        handoffs.append(handoff_record_id(SESSIONS_NAMESPACE, sleep["event_id"]))
        messages += [(session_id.encode(), session_event("session.woke")(session_id)),
                     *([] if case is early else [(session_id.encode(), sent[case.name])]),
                     (session_id.encode(), dumped(sleep))]
    async with TopicReader(stack.broker.bootstrap, "sessions.events.dlq") as dlq:
        await produce(stack.broker.bootstrap, "sessions.events", messages)
        # Every session behind a bad event sleeps, and its handoff is stored and announced.
        await updates.wait_for(lambda m: set(handoffs) <= set(
            updated_ids(m, SESSIONS_NAMESPACE)), 60)
        await dlq.wait_for(lambda m: all(letters_of(m, sessions[case.name].encode())
                                         for case in SESSION_CASES), 60)
        for case in SESSION_CASES:
            (letter,) = letters_of(dlq.messages, sessions[case.name].encode())
            assert letter.headers["dlq.reason"].decode() == case.reason, case.name
            assert letter.value == sent[case.name], case.name
    assert worker.process is not None and worker.process.poll() is None
    assert await crashes(http) == crashes_before


@dataclass(frozen=True)
class RatingCase:
    name: str
    # The memory.rate's payload, given its namespace's shared memory and Bob's personal one.
    payload: Callable[[str, str], dict[str, Any]]
    reason: str


def by_ann(**payload: Any) -> dict[str, Any]:
    return {"agent_id": "ann", **payload}


# Each in a namespace of its own holding a shared memory and a personal one of Bob's, between
# those writes and a valid rating of the shared memory by Ann.
RATING_CASES = [
    RatingCase("an empty list", lambda shared, bobs: by_ann(ratings=[]), "invalid_event"),
    RatingCase("51 ratings", lambda shared, bobs: by_ann(ratings=[
        {"memory_id": f"mem_{n}", "useful": True} for n in range(51)]), "invalid_event"),
    RatingCase("an unknown memory", lambda shared, bobs: by_ann(ratings=[
        {"memory_id": "mem_nothing", "useful": True}]), "broken_reference"),
    RatingCase("another agent's personal memory", lambda shared, bobs: by_ann(ratings=[
        {"memory_id": bobs, "useful": False}]), "broken_reference"),
    RatingCase("an unknown memory beside a valid one", lambda shared, bobs: by_ann(ratings=[
        {"memory_id": shared, "useful": True}, {"memory_id": "mem_nothing", "useful": True}]),
        "broken_reference"),
    RatingCase("useful as a word", lambda shared, bobs: by_ann(ratings=[
        {"memory_id": shared, "useful": "yes"}]), "invalid_event"),
    RatingCase("useful as a number", lambda shared, bobs: by_ann(ratings=[
        {"memory_id": shared, "useful": 1}]), "invalid_event"),
    RatingCase("one memory rated twice", lambda shared, bobs: by_ann(ratings=[
        {"memory_id": shared, "useful": True}, {"memory_id": shared, "useful": False}]),
        "invalid_event"),
    RatingCase("an oversized gap", lambda shared, bobs: by_ann(ratings=[
        {"memory_id": shared, "useful": False}], gap="g" * 2001), "invalid_event"),
    RatingCase("a gap query without its gap", lambda shared, bobs: by_ann(ratings=[
        {"memory_id": shared, "useful": False}], gap_query="vpn"), "invalid_event"),
    RatingCase("no rater", lambda shared, bobs: {"ratings": [
        {"memory_id": shared, "useful": True}]}, "invalid_event"),
]


async def test_no_bad_rating_stops_the_rating_behind_it(
    stack: Stack, worker: Worker, updates: TopicReader, memory_dlq: TopicReader,
    http: httpx.AsyncClient,
) -> None:
    crashes_before = await crashes(http)
    namespaces = {case.name: f"bad-rate-{n}-{uuid.uuid4().hex[:8]}"
                  for n, case in enumerate(RATING_CASES)}
    sent: dict[str, bytes] = {}
    bad_ids, valid_ids, written = set(), {}, set()
    messages: list[tuple[bytes, bytes | None]] = []
    for case in RATING_CASES:
        namespace = namespaces[case.name]
        shared = envelope("memory.write", namespace, {"text": "Deploys need the VPN up."})
        bobs = envelope("memory.write", namespace, {
            "text": "Bob keeps his VPN token in the vault.", "scope": "personal",
            "agent_id": "bob"})
        shared_id = memory_record_id(namespace, shared["event_id"])
        bobs_id = memory_record_id(namespace, bobs["event_id"])
        written |= {shared_id, bobs_id}
        bad = envelope("memory.rate", namespace, case.payload(shared_id, bobs_id))
        valid = envelope("memory.rate", namespace, by_ann(ratings=[
            {"memory_id": shared_id, "useful": True}], gap="how to renew the VPN token"))
        sent[case.name] = dumped(bad)
        bad_ids.add(bad["event_id"])
        valid_ids[valid["event_id"]] = shared_id
        messages += [(namespace.encode(), dumped(document))
                     for document in (shared, bobs, bad, valid)]
    await produce_values(stack.broker.bootstrap, "memory.events", messages)
    await updates.wait_for(lambda m: written <= {
        record_id for namespace in namespaces.values()
        for record_id in updated_ids(m, namespace)}, 60)

    # Each bad rating is dead-lettered once, as its original bytes, with its reason.
    await memory_dlq.wait_for(lambda m: all(
        letters_of(m, namespaces[case.name].encode()) for case in RATING_CASES), 60)
    for case in RATING_CASES:
        (letter,) = letters_of(memory_dlq.messages, namespaces[case.name].encode())
        assert letter.headers["dlq.reason"].decode() == case.reason, case.name
        assert letter.value == sent[case.name], case.name

    # Every valid rating behind one is applied; nothing of a bad one is, not even in part.
    connection = await asyncpg.connect(stack.pg_dsn)
    try:
        for _ in range(100):
            rows = await connection.fetch(
                "SELECT event_id, memory_id, agent_id, useful FROM memory_valuations "
                "WHERE namespace = ANY($1::text[])", list(namespaces.values()))
            if len(rows) >= len(valid_ids):
                break
            await asyncio.sleep(0.1)
        gaps = await connection.fetchval(
            "SELECT count(*) FROM memory_gaps WHERE namespace = ANY($1::text[])",
            list(namespaces.values()))
    finally:
        await connection.close()
    assert {(row["event_id"], row["memory_id"], row["agent_id"], row["useful"])
            for row in rows} == {(event_id, memory_id, "ann", True)
                                 for event_id, memory_id in valid_ids.items()}
    assert gaps == len(RATING_CASES)
    assert worker.process is not None and worker.process.poll() is None
    assert await crashes(http) == crashes_before


@dataclass(frozen=True)
class ScoringCase:
    name: str
    payload: dict[str, Any]
    reason: str
    # What the dead letter's error says.
    says: str


def by_admin(**payload: Any) -> dict[str, Any]:
    return {"changed_by": "key:0123456789ab", **payload}


# Each in a namespace of its own, never changed (version 0), before a valid change.
SCORING_CASES = [
    ScoringCase("an unknown parameter", by_admin(changes={"boost": 0.5}), "invalid_event",
                "boost is not a scoring parameter"),
    ScoringCase("a number as a string", by_admin(changes={"blend_boost_factor": "0.5"}),
                "invalid_event", "must be a number (got str)"),
    ScoringCase("a boolean", by_admin(changes={"blend_boost_factor": True}), "invalid_event",
                "must be a number (got bool)"),
    ScoringCase("weights that do not sum to 1", by_admin(changes={
        "blend_usefulness_weight": 0.9}), "invalid_event", "must sum to 1"),
    ScoringCase("a value out of its range", by_admin(changes={"recency_floor": 1.5}),
                "invalid_event", "recency_floor must be in [0, 1] (got 1.5)"),
    ScoringCase("a fraction for an integer", by_admin(changes={
        "min_valuations_for_signal": 2.5}), "invalid_event",
        "min_valuations_for_signal must be an integer"),
    ScoringCase("no change", by_admin(changes={}), "invalid_event", "at least 1 item"),
    ScoringCase("no author", {"changes": {"blend_boost_factor": 0.2}}, "invalid_event",
                "changed_by"),
    ScoringCase("a change made on a version the config is not at", by_admin(
        changes={"blend_boost_factor": 0.2}, expected_version=3), "stale_version",
        "made on version 3; the config is at version 0"),
]


async def dlq_count(http: httpx.AsyncClient, reason: str) -> float:
    text = (await http.get("/metrics")).text
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith("memstream_dlq_total{") and f'reason="{reason}"' in line
               and 'topic="memory.events"' in line)


async def test_no_bad_scoring_change_stops_the_change_behind_it(
    stack: Stack, worker: Worker, memory_dlq: TopicReader, http: httpx.AsyncClient,
) -> None:
    crashes_before = await crashes(http)
    stale_before = await dlq_count(http, "stale_version")
    namespaces = {case.name: f"bad-scoring-{n}-{uuid.uuid4().hex[:8]}"
                  for n, case in enumerate(SCORING_CASES)}
    sent: dict[str, bytes] = {}
    valid_ids: dict[str, str] = {}
    messages: list[tuple[bytes, bytes | None]] = []
    for case in SCORING_CASES:
        namespace = namespaces[case.name]
        bad = envelope("memory.scoring", namespace, case.payload)
        valid = envelope("memory.scoring", namespace, by_admin(
            changes={"blend_boost_factor": 0.1}, expected_version=0))
        sent[case.name] = dumped(bad)
        valid_ids[namespace] = valid["event_id"]
        messages += [(namespace.encode(), dumped(bad)), (namespace.encode(), dumped(valid))]
    await produce_values(stack.broker.bootstrap, "memory.events", messages)

    # Each bad change is dead-lettered once, as its original bytes, with its reason.
    await memory_dlq.wait_for(lambda m: all(
        letters_of(m, namespaces[case.name].encode()) for case in SCORING_CASES), 60)
    for case in SCORING_CASES:
        (letter,) = letters_of(memory_dlq.messages, namespaces[case.name].encode())
        assert letter.headers["dlq.reason"].decode() == case.reason, case.name
        assert case.says in letter.headers["dlq.error"].decode(), case.name
        assert letter.value == sent[case.name], case.name

    # The valid change behind each is version 1 of its namespace: no bad one made a version.
    connection = await asyncpg.connect(stack.pg_dsn)
    try:
        for _ in range(100):
            rows = await connection.fetch(
                "SELECT namespace, version, event_id, changes FROM scoring_config_versions "
                "WHERE namespace = ANY($1::text[])", list(namespaces.values()))
            if len(rows) >= len(valid_ids):
                break
            await asyncio.sleep(0.1)
    finally:
        await connection.close()
    assert {row["namespace"]: (row["version"], row["event_id"], row["changes"])
            for row in rows} == {namespace: (1, event_id, '{"blend_boost_factor": 0.1}')
                                 for namespace, event_id in valid_ids.items()}
    assert await dlq_count(http, "stale_version") == stale_before + 1
    assert worker.process is not None and worker.process.poll() is None
    assert await crashes(http) == crashes_before
