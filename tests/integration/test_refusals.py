"""Low-value writes on the real stack: a filler write is refused, announced once with its
reason, recorded and counted, and stored nowhere; the valid write behind it is stored."""

from __future__ import annotations

import json
import re

import asyncpg
import httpx
import pytest

from harness.kafka_io import TopicReader, produce, wait_caught_up
from harness.stack import Stack, Worker
from memstream_client.ids import memory_record_id
from tests.integration.conftest import event

pytestmark = pytest.mark.integration

VALID = "Filler refusals leave the staging VPN note stored."


def refused_count(metrics: str, reason: str) -> float:
    found = re.search(rf'^memstream_refused_writes_total{{reason="{reason}"}} (\S+)$', metrics,
                      re.MULTILINE)
    assert found, f"no series for {reason}"
    return float(found.group(1))


def announcements(updates: TopicReader, record_id: str) -> list[dict[str, object]]:
    return [body for body in (json.loads(m.value) for m in updates.messages)
            if body["record_id"] == record_id]


async def test_a_filler_write_is_announced_as_refused_and_stored_nowhere(
    stack: Stack, worker: Worker, updates: TopicReader, memory_dlq: TopicReader,
    http: httpx.AsyncClient, namespace: str,
) -> None:
    before = refused_count((await http.get("/metrics")).text, "filler")
    key = namespace.encode()
    filler = event("memory.write", namespace, {"text": "Thanks, Ana! 🙏"}, event_id="filler-1")
    valid = event("memory.write", namespace, {"text": VALID}, event_id="valid-1")
    refused_id = memory_record_id(namespace, "filler-1")
    valid_id = memory_record_id(namespace, "valid-1")

    await produce(stack.broker.bootstrap, "memory.events", [(key, filler), (key, valid)])
    await updates.wait_for(lambda _: bool(announcements(updates, valid_id)))
    await updates.wait_for(lambda _: bool(announcements(updates, refused_id)))
    (refusal,) = announcements(updates, refused_id)
    assert (refusal["change"], refusal["reason"], refusal["version"], refusal["namespace"],
            refusal["record_kind"]) == ("refused", "filler", 0, namespace, "memory")
    assert [body["change"] for body in announcements(updates, valid_id)] == ["created"]

    connection = await asyncpg.connect(stack.pg_dsn)
    try:
        stored = {row["record_id"] for row in await connection.fetch(
            "SELECT record_id FROM records WHERE namespace = $1", namespace)}
        row = await connection.fetchrow(
            "SELECT * FROM refused_writes WHERE record_id = $1", refused_id)
    finally:
        await connection.close()
    assert stored == {valid_id}
    assert row is not None
    assert (row["event_id"], row["namespace"], row["reason"], row["producer"],
            row["source_topic"]) == ("filler-1", namespace, "filler", "tests", "memory.events")
    assert row["announced_at"] is not None

    hits = (await http.get("/v1/search", params={
        "namespace": namespace, "query": "thanks Ana", "min_score": "0"})).json()["hits"]
    assert [hit["record_id"] for hit in hits] == [valid_id]
    metrics = (await http.get("/metrics")).text
    assert refused_count(metrics, "filler") == before + 1
    assert re.search(r'^memstream_events_total\{outcome="refused",topic="memory.events",'
                     r'type="memory.write"\} [1-9]', metrics, re.MULTILINE)

    # A replay (a producer retrying, a redelivery) is the same refusal: not announced again.
    await produce(stack.broker.bootstrap, "memory.events", [(key, filler), (key, valid)])
    await wait_caught_up(stack.broker.bootstrap, worker.app_id, ["memory.events"])
    assert len(announcements(updates, refused_id)) == 1
    assert len(announcements(updates, valid_id)) == 1
    assert refused_count((await http.get("/metrics")).text, "filler") == before + 1
    assert [m for m in memory_dlq.messages if m.key == key] == [], "a refusal is no dead letter"
