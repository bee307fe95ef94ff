"""Ratings on the real stack (docs/events.md#memoryrate): an agent's rating stores its
valuations, counts its gap and moves its score inputs, once (a replay of the event, from
Kafka or over HTTP with the same event id, changes nothing); a search by a key bound to an
agent counts an access of each hit for that agent, and one by a key bound to none counts
nothing; an agent may rate only what it may read, over HTTP, through the SDK and on Kafka."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
import httpx
import pytest

from harness.kafka_io import TopicReader, produce, wait_caught_up
from harness.stack import Stack, Worker
from memstream_client.sdk import AsyncMemoryClient, NotFound
from publisher.kafka_publisher import Publisher
from tests.integration.conftest import updated_ids
from tests.integration.test_write_endpoints import client, posted

pytestmark = pytest.mark.integration

WAIT_S = 60.0


async def written(stack: Stack, updates: TopicReader, namespace: str) -> dict[str, str]:
    """A shared memory, and a personal one of Ann's and of Bob's, once announced."""
    async with Publisher(stack.broker.bootstrap, producer="tests") as publisher:
        ids = {
            "shared": await publisher.write_memory(
                namespace, "Staging deploys need the VPN up before the pipeline starts."),
            "ann": await publisher.write_memory(
                namespace, "Ann renews her VPN token every Monday.", scope="personal",
                agent_id="ann"),
            "bob": await publisher.write_memory(
                namespace, "Bob keeps his VPN token in the team vault.", scope="personal",
                agent_id="bob"),
        }
    await updates.wait_for(lambda m: set(ids.values()) <= set(updated_ids(m, namespace)),
                           WAIT_S)
    return ids


async def scores(http: httpx.AsyncClient, namespace: str, memory_id: str,
                 until: str, at_least: int) -> dict[str, Any]:
    """The key's agent's score inputs of a memory, once `until` reaches `at_least`."""
    for _ in range(200):
        answer = await http.get("/v1/memory-scores", params={
            "namespace": namespace, "memory_id": memory_id})
        assert answer.status_code == 200, answer.text
        found: dict[str, Any] = answer.json()
        if found[until] >= at_least:
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"{until} of {memory_id} never reached {at_least}: {found}")


async def table_rows(stack: Stack, query: str, *args: Any) -> list[asyncpg.Record]:
    connection = await asyncpg.connect(stack.pg_dsn)
    try:
        return list(await connection.fetch(query, *args))
    finally:
        await connection.close()


async def test_a_rating_is_stored_once_and_moves_the_score_inputs(
    stack: Stack, worker: Worker, updates: TopicReader, namespace: str,
) -> None:
    ids = await written(stack, updates, namespace)
    ann = stack.make_key("--namespace", namespace, "--perm", "read,write", "--agent", "ann")
    event_id = uuid.uuid4().hex
    body = {"namespace": namespace, "event_id": event_id, "ratings": [
        {"memory_id": ids["shared"], "useful": True},
        {"memory_id": ids["ann"], "useful": False}],
        "gap": "How to renew a VPN token", "gap_query": "vpn token renewal"}
    async with client(worker, ann) as http:
        accepted = await posted(http, "/v1/ratings", body)
        assert accepted == {"event_id": event_id, "agent_id": "ann", "rated": 2}
        shared = await scores(http, namespace, ids["shared"], "valuation_count", 1)
        own = await scores(http, namespace, ids["ann"], "valuation_count", 1)
        assert (shared["useful_count"], own["useful_count"]) == (1, 0)
        assert shared["last_valuation_at"] is not None
        assert [v["event_id"] for v in shared["valuations"]] == [event_id]
        assert shared["valuations"][0]["useful"] is True

        # The same event again, over HTTP and replayed from Kafka, changes nothing.
        await posted(http, "/v1/ratings", body)
        async with TopicReader(stack.broker.bootstrap, "memory.events") as topic:
            await topic.wait_for(lambda m: any(event_id.encode() in (x.value or b"")
                                               for x in m), WAIT_S)
            replay = [(m.key, m.value) for m in topic.messages
                      if m.key is not None and m.value is not None
                      and event_id.encode() in m.value]
        await produce(stack.broker.bootstrap, "memory.events", replay)
        # A second rating by the same agent, sent after the replays, is counted.
        later = await posted(http, "/v1/ratings", {"namespace": namespace, "ratings": [
            {"memory_id": ids["shared"], "useful": False}],
            "gap": "  how to RENEW a VPN token "})
        await wait_caught_up(stack.broker.bootstrap, worker.app_id, ["memory.events"])
        shared = await scores(http, namespace, ids["shared"], "valuation_count", 2)
        assert (shared["valuation_count"], shared["useful_count"]) == (2, 1)
        assert [v["event_id"] for v in shared["valuations"]] == [later["event_id"], event_id]
        own = await scores(http, namespace, ids["ann"], "valuation_count", 1)
        assert (own["valuation_count"], own["useful_count"]) == (1, 0)

    valuations = await table_rows(
        stack, "SELECT event_id, memory_id, agent_id, useful FROM memory_valuations "
        "WHERE namespace = $1", namespace)
    assert {tuple(row) for row in valuations} == {
        (event_id, ids["shared"], "ann", True), (event_id, ids["ann"], "ann", False),
        (later["event_id"], ids["shared"], "ann", False)}
    # The same need, said again in other case and spacing, is one gap met twice.
    (gap,) = await table_rows(
        stack, "SELECT agent_id, source, gap, query, times, last_event_id, first_seen, "
        "last_seen FROM memory_gaps WHERE namespace = $1", namespace)
    assert (gap["agent_id"], gap["source"], gap["query"], gap["times"],
            gap["last_event_id"]) == ("ann", "explicit", "vpn token renewal", 2,
                                      later["event_id"])
    assert gap["first_seen"] <= gap["last_seen"]


async def test_a_search_by_a_key_bound_to_an_agent_counts_its_accesses(
    stack: Stack, worker: Worker, updates: TopicReader, namespace: str,
) -> None:
    ids = await written(stack, updates, namespace)
    ann = stack.make_key("--namespace", namespace, "--perm", "read,write", "--agent", "ann")
    reader = stack.make_key("--namespace", namespace, "--perm", "read")
    search = {"namespace": namespace, "query": "VPN token", "min_score": "0", "limit": "10"}
    async with client(worker, reader) as unbound:
        hits = (await unbound.get("/v1/search", params=search)).json()["hits"]
        assert ids["shared"] in [hit["record_id"] for hit in hits]
    async with client(worker, ann) as http:
        for _ in range(2):
            hits = (await http.get("/v1/search", params=search)).json()["hits"]
            assert {ids["shared"], ids["ann"]} <= {hit["record_id"] for hit in hits}
        shared = await scores(http, namespace, ids["shared"], "access_count", 2)
        own = await scores(http, namespace, ids["ann"], "access_count", 2)
    assert (shared["access_count"], own["access_count"]) == (2, 2)
    assert shared["last_access_at"] is not None and shared["valuation_count"] == 0
    # The counts are the log's rows with an agent: the unbound key's read counts for no one.
    logged = await table_rows(
        stack, "SELECT agent_id, record_id, count(*) AS n FROM memory_retrieval_log "
        "WHERE namespace = $1 GROUP BY agent_id, record_id", namespace)
    counted = await table_rows(
        stack, "SELECT agent_id, memory_id, access_count FROM memory_scores "
        "WHERE namespace = $1", namespace)
    assert any(row["agent_id"] is None for row in logged)
    assert {(row["agent_id"], row["memory_id"], row["access_count"]) for row in counted} == {
        (row["agent_id"], row["record_id"], row["n"]) for row in logged
        if row["agent_id"] is not None}


async def test_an_agent_rates_only_what_it_may_read(
    stack: Stack, worker: Worker, updates: TopicReader, memory_dlq: TopicReader,
    namespace: str, tmp_path_factory: pytest.TempPathFactory,
) -> None:
    ids = await written(stack, updates, namespace)
    bob = stack.make_key("--namespace", namespace, "--perm", "read,write", "--agent", "bob")
    writer = stack.make_key("--namespace", namespace, "--perm", "read,write")
    admin = stack.make_key("--namespace", namespace, "--perm", "admin")

    def rating(memory_id: str, **fields: Any) -> dict[str, Any]:
        return {"namespace": namespace, "ratings": [{"memory_id": memory_id,
                                                     "useful": False}], **fields}

    async with client(worker, bob) as as_bob:
        hidden = await as_bob.post("/v1/ratings", json=rating(ids["ann"]))
        missing = await as_bob.post("/v1/ratings", json=rating("mem_nothing"))
        assert (hidden.status_code, missing.status_code) == (404, 404)
        assert hidden.json()["reason"] == "broken_reference"
        assert hidden.json()["error"] == missing.json()["error"].replace(
            "mem_nothing", ids["ann"])
        # Nor may Bob rate as Ann, nor read Ann's scores.
        assert (await as_bob.post("/v1/ratings", json=rating(
            ids["shared"], agent_id="ann"))).status_code == 403
        scored = await as_bob.get("/v1/memory-scores", params={
            "namespace": namespace, "memory_id": ids["ann"]})
        assert scored.status_code == 404
    async with client(worker, writer) as unbound:
        # A key bound to no agent has no rater, and may not name one without admin.
        nobody = await unbound.post("/v1/ratings", json=rating(ids["shared"]))
        assert (nobody.status_code, nobody.json()["reason"]) == (400, "invalid_event")
        assert (await unbound.post("/v1/ratings", json=rating(
            ids["shared"], agent_id="ann"))).status_code == 403
    async with client(worker, admin) as as_admin:
        await posted(as_admin, "/v1/ratings", rating(ids["ann"], agent_id="ann"))
        refused = await as_admin.post("/v1/ratings", json=rating(ids["ann"], agent_id="bob"))
        assert refused.status_code == 404

    # Through the SDK, refused as not found; straight on Kafka, dead-lettered.
    home = {"HOME": str(tmp_path_factory.mktemp("ratings-home"))}
    async with AsyncMemoryClient(worker.base_url, key=bob, namespace=namespace,
                                 env=home) as sdk:
        with pytest.raises(NotFound) as not_found:
            await sdk.rate_memories({ids["shared"]: True, ids["ann"]: False})
        assert not_found.value.reason == "broken_reference"
        accepted = await sdk.rate_memories({ids["shared"]: True, ids["bob"]: True},
                                           gap="the VPN's renewal page")
        assert (accepted.agent_id, accepted.rated) == ("bob", 2)
    async with Publisher(stack.broker.bootstrap, producer="tests") as publisher:
        sneaked = await publisher.rate_memories(namespace, "bob", {ids["ann"]: False})
    await memory_dlq.wait_for(lambda m: any(sneaked.encode() in (x.value or b"")
                                            for x in m), WAIT_S)
    (letter,) = [m for m in memory_dlq.messages if sneaked.encode() in (m.value or b"")]
    assert letter.headers["dlq.reason"] == b"broken_reference"
    async with AsyncMemoryClient(worker.base_url, key=bob, namespace=namespace,
                                 env=home) as sdk:
        for _ in range(200):
            mine = await sdk.memory_scores(ids["bob"])
            assert mine.use is not None
            if mine.use.valuation_count:
                break
            await asyncio.sleep(0.1)
        assert (mine.agent_id, mine.use.valuation_count, mine.use.useful_count) == ("bob", 1, 1)
        # One or two ratings are not yet a signal: neutral usefulness.
        assert mine.use.adaptive.usefulness == 0.5
    rated = await table_rows(
        stack, "SELECT DISTINCT agent_id, memory_id FROM memory_valuations "
        "WHERE namespace = $1", namespace)
    assert {tuple(row) for row in rated} == {
        ("ann", ids["ann"]), ("bob", ids["shared"]), ("bob", ids["bob"])}
