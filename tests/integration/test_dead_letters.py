"""Dead letters are listed, on the real stack: events a producer sends raw (as kcat does) that
no stage can use end in `GET /v1/dead-letters` and `memstream dead-letters` with their
reasons, redacted, once each however often their dead-letter topic is read, and only to the
keys that may see them."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import httpx
import pytest
from aiokafka import AIOKafkaProducer

from harness.kafka_io import Received, TopicReader, produce, wait_caught_up
from harness.stack import Stack, Worker
from processors.events.dead_letters import DeadLetterEntry, DeadLetterHeaders, dead_letter_entry
from stores.dead_letters import DeadLetterFilter, DeadLetterPosition, PostgresDeadLetters
from stores.postgres.rows import create_pool
from streams.plumbing.config import REPO_ROOT
from tests.integration.test_cli import MEMSTREAM

pytestmark = pytest.mark.integration

T = TypeVar("T")
DLQ = "memory.events.dlq"
SECRET = "ghp_" + "Zq9" * 12
AT = datetime(2026, 5, 1, 12, tzinfo=UTC)


async def eventually(check: Callable[[], Awaitable[T | None]], what: str,
                     timeout_s: float = 60.0) -> T:
    deadline = time.monotonic() + timeout_s
    while (found := await check()) is None:
        assert time.monotonic() < deadline, f"{what}: not after {timeout_s}s"
        await asyncio.sleep(0.2)
    return found


def unknown_type(namespace: str) -> bytes:
    return json.dumps({"event_id": uuid.uuid4().hex, "type": "memory.wirte",
                       "namespace": namespace, "producer": "kcat",
                       "payload": {"text": f"deploy with token {SECRET}"}}).encode()


async def listed(http: httpx.AsyncClient, **params: Any) -> dict[str, Any]:
    answer = await http.get("/v1/dead-letters", params=params)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


async def dead_letters_keyed(http: httpx.AsyncClient, key: str, count: int,
                             **params: Any) -> list[dict[str, Any]]:
    """The newest dead letters of `key` once there are `count` of them."""
    async def found() -> list[dict[str, Any]] | None:
        body = await listed(http, limit="500", **params)
        ours = [d for d in body["dead_letters"] if d["key"] == key]
        return ours if len(ours) >= count else None
    return await eventually(found, f"{count} dead letters keyed {key}")


def coordinates(message: Received) -> str:
    return f"{message.topic}/{message.partition}/{message.offset}"


async def test_events_no_stage_can_use_are_listed_with_their_reasons(
    stack: Stack, worker: Worker, http: httpx.AsyncClient, memory_dlq: TopicReader,
    namespace: str, tmp_path: Path,
) -> None:
    key = namespace.encode()
    half_written = b'{"event_id": "half-written'
    not_utf8 = b'{"namespace": "' + key + b'", "text": "caf\xe9"}'
    await produce(stack.broker.bootstrap, "memory.events",
                  [(key, unknown_type(namespace)), (key, half_written), (key, not_utf8)])
    letters = {m.value: m for m in await memory_dlq.wait_for(
        lambda messages: len([m for m in messages if m.key == key]) == 3, 60)
        if m.key == key}

    (unknown,) = await dead_letters_keyed(http, namespace, 1, namespace=namespace)
    assert unknown["reason"] == "unknown_type"
    assert (unknown["error_class"], unknown["retriable"]) == ("Rejected", False)
    assert "'memory.wirte' is not one of" in unknown["error"]
    assert unknown["namespace"] == namespace
    assert SECRET not in unknown["first_bytes"]
    assert "[REDACTED:github_token]" in unknown["first_bytes"]
    assert unknown["first_bytes_utf8"] is True
    (sent,) = [v for v in letters if v.startswith(b'{"event_id"') and b"wirte" in v]
    assert unknown["size"] == len(sent)
    message = letters[sent]
    assert unknown["dlq"] == {"topic": DLQ, "partition": message.partition,
                              "offset": message.offset}
    assert unknown["source"] == {
        "topic": "memory.events",
        "partition": int(message.headers["dlq.source.partition"]),
        "offset": int(message.headers["dlq.source.offset"])}

    # What a namespace's filter cannot show: the values that name no namespace.
    broken = {d["first_bytes"]: d for d in await dead_letters_keyed(
        http, namespace, 2, reason="malformed_json")}
    assert set(broken) == {half_written.decode(), '{"namespace": "' + namespace
                           + '", "text": "caf\\xe9"}'}
    assert all(d["namespace"] is None for d in broken.values())
    assert broken[half_written.decode()]["first_bytes_utf8"] is True
    assert [d["first_bytes_utf8"] for d in broken.values()].count(False) == 1
    assert (await listed(http, namespace=namespace))["by_reason"] == {"unknown_type": 1}
    one = await http.get(f"/v1/dead-letters/{unknown['dead_letter_id']}")
    assert one.status_code == 200 and one.json() == unknown

    # Nothing of the secret is in the table.
    connection = await asyncpg.connect(stack.pg_dsn)
    try:
        leaked = await connection.fetchval(
            "SELECT count(*) FROM dead_letters WHERE head LIKE $1 OR error LIKE $1",
            f"%{SECRET[:12]}%")
    finally:
        await connection.close()
    assert leaked == 0

    # The replay command given selects this dead letter (run dry: the cause is not fixed).
    command = shlex.split(unknown["replay_command"])
    assert command[:3] == ["python", "-m", "streams.commands.replay_dead_letters"]
    dry = await asyncio.to_thread(
        subprocess.run, [sys.executable, *command[1:], "--dry-run", "--json"], cwd=REPO_ROOT,
        env={**os.environ, "MEMSTREAM_KAFKA_BOOTSTRAP": stack.broker.bootstrap},
        capture_output=True, text=True, timeout=120)
    assert dry.returncode == 0, dry.stderr
    assert coordinates(message) in json.loads(dry.stdout)["replayed_dead_letters"]

    # The command line, at 80 columns, configured by the environment alone.
    def cli(*args: str) -> list[str]:
        environment = {name: value for name, value in os.environ.items()
                       if not name.startswith("MEMSTREAM_")}
        ran = subprocess.run(
            [str(MEMSTREAM), "dead-letters", *args], cwd=tmp_path, capture_output=True,
            text=True, timeout=60, env={**environment, "HOME": str(tmp_path), "COLUMNS": "80",
                                        "MEMSTREAM_URL": worker.base_url,
                                        "MEMSTREAM_API_KEY": stack.operator_key})
        assert ran.returncode == 0, ran.stderr
        lines = ran.stdout.splitlines()
        assert all(len(line) <= 80 for line in lines), lines
        return lines

    header, row = cli("-n", namespace)
    assert header.split() == ["time", "topic", "reason", "key", "bytes"]
    assert row.split()[2:5] == ["memory.events", "unknown_type", namespace]
    header, *rows = cli("--reason", "malformed_json", "--limit", "2")
    assert [r.split()[2:5] for r in rows] == [["memory.events", "malformed_json", namespace]] * 2


async def test_reading_a_dead_letter_topic_again_adds_no_dead_letter(
    stack: Stack, worker: Worker, http: httpx.AsyncClient, memory_dlq: TopicReader,
    namespace: str,
) -> None:
    key = namespace.encode()
    await produce(stack.broker.bootstrap, "memory.events", [(key, unknown_type(namespace))])
    (letter,) = [m for m in await memory_dlq.wait_for(
        lambda messages: any(m.key == key for m in messages), 60) if m.key == key]
    (kept,) = await dead_letters_keyed(http, namespace, 1, namespace=namespace)

    # The same dead letter again, as a worker killed before acknowledging the event sends it.
    producer = AIOKafkaProducer(bootstrap_servers=stack.broker.bootstrap, acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(DLQ, letter.value, key=key,
                                     headers=list(letter.headers.items()))
    finally:
        await producer.stop()
    await memory_dlq.wait_for(lambda messages: len([m for m in messages if m.key == key]) == 2)
    await wait_caught_up(stack.broker.bootstrap, worker.group, [DLQ])

    again = await listed(http, namespace=namespace)
    assert again["total"] == 1
    assert again["dead_letters"] == [kept], "the first one kept, as it was"


async def test_a_namespace_key_sees_only_its_namespace_dead_letters(
    stack: Stack, worker: Worker, http: httpx.AsyncClient, memory_dlq: TopicReader,
) -> None:
    ours, theirs = f"ns-{uuid.uuid4().hex[:10]}", f"ns-{uuid.uuid4().hex[:10]}"
    await produce(stack.broker.bootstrap, "memory.events", [
        (ours.encode(), unknown_type(ours)), (theirs.encode(), unknown_type(theirs)),
        (theirs.encode(), b"{not json")])
    (mine,) = await dead_letters_keyed(http, ours, 1, namespace=ours)
    (other,) = await dead_letters_keyed(http, theirs, 1, namespace=theirs)
    (nobodys,) = await dead_letters_keyed(http, theirs, 1, reason="malformed_json")

    def as_key(token: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=worker.base_url, timeout=10,
                                 headers={"Authorization": f"Bearer {token}"})

    admin = stack.make_key("--namespace", ours, "--perm", "admin")
    async with as_key(admin) as client:
        own = (await client.get("/v1/dead-letters")).json()
        assert own["namespace"] == ours
        assert own["dead_letters"] == [mine] and own["total"] == 1
        refused = await client.get("/v1/dead-letters", params={"namespace": theirs})
        assert refused.status_code == 403
        assert (await client.get(f"/v1/dead-letters/{mine['dead_letter_id']}")).json() == mine
        for hidden in (other, nobodys):
            missing = await client.get(f"/v1/dead-letters/{hidden['dead_letter_id']}")
            assert missing.status_code == 404
            assert missing.json() == {"error": f"no dead letter {hidden['dead_letter_id']!r}"}
    for grant in (("--perm", "read,write,review"), ("--perm", "admin", "--agent", "finn")):
        async with as_key(stack.make_key("--namespace", ours, *grant)) as client:
            assert (await client.get("/v1/dead-letters")).status_code == 403


async def test_the_store_keeps_the_first_of_an_id_and_pages_newest_first(
    stack: Stack, worker: Worker, namespace: str,
) -> None:
    """Filters, counts and pages in SQL, on dead letters of this test's namespace."""
    def entry(offset: int, reason: str, topic: str = "memory.events",
              second: int = 0) -> DeadLetterEntry:
        return dead_letter_entry(
            f"{topic}.dlq", 0, offset, AT + timedelta(seconds=second), namespace.encode(),
            json.dumps({"namespace": namespace}).encode(), DeadLetterHeaders(
                reason=reason.encode(), source_topic=topic.encode(),
                source_partition=b"0", source_offset=str(offset).encode()))

    # The worker applied the migrations.
    pool = await create_pool(stack.pg_dsn)
    store = PostgresDeadLetters(pool)
    base = uuid.uuid4().int % 10**9
    first, later_copy = entry(base, "unknown_type"), entry(base, "oversized", second=9)
    rest = [entry(base + 1, "unknown_type", second=1), entry(base + 2, "oversized", second=2),
            entry(base + 3, "invalid_event", "runs.events", second=3)]
    try:
        assert await store.record_dead_letters([first, later_copy, *rest]) == {
            e.dead_letter_id for e in (first, *rest)}
        assert await store.record_dead_letters([later_copy]) == set()
        mine = DeadLetterFilter(namespace=namespace)
        assert await store.dead_letter(first.dead_letter_id) == first, "the first one kept"
        assert await store.dead_letter_counts(mine) == {
            "invalid_event": 1, "oversized": 1, "unknown_type": 2}
        newest = await store.dead_letters(mine, None, 3)
        assert newest == [*reversed(rest)]
        after = DeadLetterPosition(newest[-1].dead_lettered_at, newest[-1].dead_letter_id)
        assert await store.dead_letters(mine, after, 3) == [first]
        narrowed = replace(mine, reasons=frozenset({"unknown_type", "oversized"}),
                           dlq_topics=frozenset({"memory.events.dlq"}),
                           since=AT + timedelta(seconds=1))
        assert await store.dead_letters(narrowed, None, 10) == [rest[1], rest[0]]
        assert await store.dead_letter_counts(replace(mine, reasons=frozenset())) == {}
    finally:
        await pool.close()
