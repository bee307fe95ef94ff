"""python -m streams.commands.replay_dead_letters on the real stack: the redrive of a dead
letter once its cause is fixed, run as operators run it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime

import asyncpg
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from harness.kafka_io import Received, TopicReader, produce
from harness.stack import Stack, Worker
from memstream_client.ids import memory_record_id
from streams.commands.replay_dead_letters import DeadLetter, read_dead_letters
from streams.plumbing.config import REPO_ROOT
from streams.plumbing.topics import partitions_of
from tests.integration.conftest import event, updated_ids

pytestmark = pytest.mark.integration

DLQ = "memory.events.dlq"


async def replay_command(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "streams.commands.replay_dead_letters", *args],
        cwd=REPO_ROOT, env={**os.environ, "MEMSTREAM_KAFKA_BOOTSTRAP": stack.broker.bootstrap},
        capture_output=True, text=True, timeout=120)


def dead_letters_of(messages: list[Received], key: bytes) -> dict[str, Received]:
    """This test's dead letters by reason: the DLQ is shared by the whole session."""
    return {m.headers["dlq.reason"].decode(): m for m in messages if m.key == key}


def coordinates(message: Received) -> str:
    return f"{message.topic}/{message.partition}/{message.offset}"


async def produce_dead_letter(bootstrap: str, key: bytes, value: bytes,
                              headers: list[tuple[str, bytes]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(DLQ, value, key=key, headers=headers)
    finally:
        await producer.stop()


async def replays_on_memory_events(bootstrap: str, since: datetime) -> list[DeadLetter]:
    """Every message on memory.events since `since` that is a replay of a dead letter."""
    async with AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False) as reader:
        return [message async for message in read_dead_letters(
                    reader, await partitions_of(bootstrap, "memory.events"),
                    int(since.timestamp() * 1000))
                if message.header("dlq.replay.of") is not None]


async def test_a_dead_letter_is_replayed_with_its_key_once_its_cause_is_fixed(
    stack: Stack, worker: Worker, updates: TopicReader, memory_dlq: TopicReader, namespace: str
) -> None:
    started = datetime.now(UTC)
    since = started.isoformat()
    bootstrap = stack.broker.bootstrap
    key = namespace.encode()
    release_event, hotfix_event = uuid.uuid4().hex, uuid.uuid4().hex
    release_id = memory_record_id(namespace, release_event)
    hotfix_id = memory_record_id(namespace, hotfix_event)
    hotfix = event("memory.write", namespace, {
        "text": "Hotfixes may skip the Tuesday release train with two approvals.",
        "related_ids": [release_id]}, event_id=hotfix_event)
    # Over the DLQ's value limit too: its dead letter keeps only the first 900 KiB.
    oversized = event("memory.write", namespace, {"text": "x" * 950_000})
    await produce(bootstrap, "memory.events", [(key, hotfix), (key, oversized)])
    dead = dead_letters_of(await memory_dlq.wait_for(
        lambda messages: len(dead_letters_of(messages, key)) == 2, 60), key)
    broken, cut = dead["broken_reference"], dead["oversized"]
    assert (broken.value, broken.headers["dlq.truncated"]) == (hotfix, b"false")
    assert cut.headers["dlq.truncated"] == b"true"
    # A dead letter on this DLQ that says it came from another topic is not ours to send back.
    stray_event = uuid.uuid4().hex
    await produce_dead_letter(bootstrap, key, event("memory.write", namespace, {
        "text": "Not a memory.events event."}, event_id=stray_event), [
        ("dlq.reason", b"internal_error"), ("dlq.source.topic", b"runs.events"),
        ("dlq.truncated", b"false")])
    stray = dead_letters_of(await memory_dlq.wait_for(
        lambda messages: len(dead_letters_of(messages, key)) == 3), key)["internal_error"]

    # The fix: the memory the hotfix refers to is written.
    await produce(bootstrap, "memory.events", [(key, event("memory.write", namespace, {
        "text": "Release trains leave every Tuesday at 10:00 UTC."}, event_id=release_event))])
    await updates.wait_for(lambda messages: release_id in updated_ids(messages, namespace))

    dry = await replay_command(stack, "--topic", DLQ, "--since", since, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    planned = json.loads(dry.stdout)
    assert planned["dry_run"] is True
    assert coordinates(broken) in planned["replayed_dead_letters"]
    skipped = {s["dead_letter"]: s["cause"] for s in planned["skipped_dead_letters"]}
    assert skipped[coordinates(cut)] == "truncated"
    assert skipped[coordinates(stray)] == "other_source"
    assert planned["by_reason"]["oversized"]["skipped"] >= 1

    nothing = await replay_command(stack, "--topic", DLQ, "--since", since,
                                   "--reason", "refused_by_index")
    assert nothing.returncode == 0, nothing.stderr
    assert "0 selected" in nothing.stdout
    assert nothing.stdout.splitlines()[-1].split() == ["total", "0", "0", "0"]

    done = await replay_command(stack, "--topic", DLQ, "--reason", "broken_reference",
                                "--reason", "internal_error", "--since", since, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["dry_run"] is False
    assert coordinates(broken) in report["replayed_dead_letters"]
    skipped = {s["dead_letter"]: s["cause"] for s in report["skipped_dead_letters"]}
    assert skipped == {coordinates(stray): "other_source"}, "the oversized one is not selected"
    assert "oversized" not in report["by_reason"]

    await updates.wait_for(lambda messages: hotfix_id in updated_ids(messages, namespace))
    # Only the real run published, once, and only the dead letter it could replay.
    (replayed,) = [message for message in await replays_on_memory_events(bootstrap, started)
                   if message.key == key]
    assert replayed.header("dlq.replay.of") == coordinates(broken)
    assert (replayed.key, replayed.value) == (key, hotfix), "the original key and bytes"
    connection = await asyncpg.connect(stack.pg_dsn)
    try:
        row = await connection.fetchrow(
            "SELECT text, related_ids, provenance->>'source_topic' AS topic,"
            " (provenance->>'source_offset')::bigint AS offset FROM records"
            " WHERE record_id = $1", hotfix_id)
        stray_stored = await connection.fetchval(
            "SELECT count(*) FROM records WHERE record_id = $1",
            memory_record_id(namespace, stray_event))
    finally:
        await connection.close()
    assert row is not None
    assert dict(row) == {
        "text": "Hotfixes may skip the Tuesday release train with two approvals.",
        "related_ids": [release_id], "topic": "memory.events", "offset": replayed.offset}
    assert stray_stored == 0


async def test_a_topic_that_is_not_a_dead_letter_topic_is_refused(stack: Stack) -> None:
    refused = await replay_command(stack, "--topic", "memory.events", "--dry-run")
    assert refused.returncode == 1
    assert refused.stdout == ""
    assert refused.stderr.startswith("error: ")
    assert len(refused.stderr.strip().splitlines()) == 1
    assert "memory.events" in refused.stderr
