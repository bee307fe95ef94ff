"""A memory's lifecycle on the real stack: updates, reviews, pending diffs, deprecation and
restore, each a version in Postgres, a change of the index and an announcement. The worker
runs with the default policy: approved memories take updates through review."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from embedder.model import Embedder
from harness.kafka_io import Received, TopicReader, produce, wait_caught_up
from harness.stack import MODEL_DIR, Stack, Worker
from publisher.kafka_publisher import Publisher

pytestmark = pytest.mark.integration

TEXT = "Deploys of the billing service need the office VPN up."
NEW_TEXT = "Deploys of the billing service go through the bastion host, no VPN."


def changes_of(messages: list[Received], record_id: str) -> list[tuple[str, int]]:
    """The (change, version) announced for the record, in order."""
    found = []
    for message in messages:
        body = json.loads(message.value)
        if body["record_id"] == record_id:
            found.append((body["change"], body["version"]))
    return found


async def announced(updates: TopicReader, record_id: str,
                    expected: list[tuple[str, int]]) -> None:
    await updates.wait_for(lambda messages: len(changes_of(messages, record_id)) >= len(expected))
    assert changes_of(updates.messages, record_id) == expected


async def search_ids(http: httpx.AsyncClient, namespace: str, query: str,
                     **params: Any) -> list[str]:
    answer = await http.get("/v1/search", params={"namespace": namespace, "query": query,
                                                  "min_score": "0", **params})
    assert answer.status_code == 200, answer.text
    return [hit["record_id"] for hit in answer.json()["hits"]]


async def history(http: httpx.AsyncClient, namespace: str, record_id: str) -> list[Any]:
    answer = await http.get(f"/v1/records/{record_id}/history", params={"namespace": namespace})
    assert answer.status_code == 200, answer.text
    return list(answer.json()["versions"])


def dead_letters(dlq: TopicReader, namespace: str) -> list[tuple[str, str]]:
    return [(m.headers["dlq.reason"].decode(), m.headers["dlq.error"].decode())
            for m in dlq.messages if m.key == namespace.encode()]


async def test_write_update_stale_update_deprecate_restore(
    stack: Stack, worker: Worker, updates: TopicReader, memory_dlq: TopicReader,
    http: httpx.AsyncClient, namespace: str,
) -> None:
    async with Publisher(stack.broker.bootstrap, producer="orchestrator") as publisher:
        record_id = await publisher.write_memory(namespace, TEXT, tags=["ops"])
        await announced(updates, record_id, [("created", 1)])

        # The record is approved, so protected: the update waits as a pending diff.
        diff_id = await publisher.update_memory(namespace, record_id, expected_version=1,
                                                text=NEW_TEXT, tags=["ops", "billing"])
        await announced(updates, record_id, [("created", 1), ("proposed", 1)])
        pending = (await http.get("/v1/pending-diffs", params={"namespace": namespace})).json()
        assert [(d["diff_id"], d["base_version"], d["proposed"]["text"], d["proposer"])
                for d in pending["pending_diffs"]] == [(diff_id, 1, NEW_TEXT, "orchestrator")]
        assert await search_ids(http, namespace, "bastion host") == [record_id]
        assert len(await history(http, namespace, record_id)) == 1, "not applied yet"

        await publisher.review_memory(namespace, record_id, decision="approve",
                                      reviewer="ana", diff_id=diff_id)
        await announced(updates, record_id, [("created", 1), ("proposed", 1), ("approved", 2)])
        # The index holds the new text: the lexical signal finds a word only it has.
        hits = (await http.get("/v1/search", params={
            "namespace": namespace, "query": "bastion", "min_score": "0"})).json()["hits"]
        assert [(hit["record_id"], hit["text"]) for hit in hits] == [(record_id, NEW_TEXT)]
        assert await search_ids(http, namespace, "deploys", tag="billing") == [record_id]

        stale = await publisher.update_memory(namespace, record_id, expected_version=1,
                                              text="A change made against version 1.")
        await memory_dlq.wait_for(lambda _: len(dead_letters(memory_dlq, namespace)) == 1)
        (reason, detail), = dead_letters(memory_dlq, namespace)
        assert reason == "stale_version" and "version 2" in detail, detail

        await publisher.deprecate_memory(namespace, record_id, reason="billing left the VPN",
                                         expected_version=2)
        await announced(updates, record_id, [("created", 1), ("proposed", 1), ("approved", 2),
                                             ("deprecated", 3)])
        assert await search_ids(http, namespace, "billing deploys") == []
        assert await search_ids(http, namespace, "billing deploys",
                                review_state="deprecated") == [record_id]
        shown = (await http.get(f"/v1/records/{record_id}",
                                params={"namespace": namespace})).json()
        assert shown["record"]["review_state"] == "deprecated", "readable by id"

        await publisher.restore_memory(namespace, record_id, version=1)
        await announced(updates, record_id, [("created", 1), ("proposed", 1), ("approved", 2),
                                             ("deprecated", 3), ("restored", 4)])
        hits = (await http.get("/v1/search", params={
            "namespace": namespace, "query": "office VPN", "min_score": "0"})).json()["hits"]
        assert [(hit["record_id"], hit["text"]) for hit in hits] == [(record_id, TEXT)]

    versions = await history(http, namespace, record_id)
    assert [(v["version"], v["change"], v["actor"], v["review_state"]) for v in versions] == [
        (1, "created", "orchestrator", "approved"),
        (2, "approved", "ana", "approved"),
        (3, "deprecated", "orchestrator", "deprecated"),
        (4, "restored", "orchestrator", "approved"),
    ]
    assert versions[1]["event_id"] != diff_id and versions[1]["changed"] == ["text", "tags"]
    assert versions[2]["reason"] == "billing left the VPN"
    assert versions[3]["text"] == TEXT and versions[3]["tags"] == ["ops"]
    assert stale not in {v["event_id"] for v in versions}

    diff = (await http.get(f"/v1/records/{record_id}/diff",
                           params={"namespace": namespace, "from": "1", "to": "2"})).json()
    assert diff["fields"] == {"tags": {"from": ["ops"], "to": ["ops", "billing"]}}
    assert f"-{TEXT}" in diff["text"] and f"+{NEW_TEXT}" in diff["text"]
    assert (await http.get(f"/v1/records/{record_id}/diff", params={
        "namespace": namespace, "from": "1", "to": "9"})).status_code == 400
    assert (await http.get(f"/v1/records/{record_id}/history", params={
        "namespace": f"{namespace}-other"})).status_code == 404


async def test_a_rejected_diff_changes_nothing_and_a_newer_one_supersedes(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient,
    namespace: str,
) -> None:
    async with Publisher(stack.broker.bootstrap, producer="agent-7") as publisher:
        record_id = await publisher.write_memory(namespace, TEXT)
        await announced(updates, record_id, [("created", 1)])
        first = await publisher.update_memory(namespace, record_id, expected_version=1,
                                              text="First proposal.")
        second = await publisher.update_memory(namespace, record_id, expected_version=1,
                                               text="Second proposal.")
        await announced(updates, record_id, [("created", 1), ("proposed", 1), ("proposed", 1)])
        pending = (await http.get("/v1/pending-diffs", params={
            "namespace": namespace, "record_id": record_id})).json()["pending_diffs"]
        assert [d["diff_id"] for d in pending] == [second], f"{first} was superseded"

        await publisher.review_memory(namespace, record_id, decision="reject", reviewer="ana",
                                      diff_id=second, note="not true")
        await announced(updates, record_id, [("created", 1), ("proposed", 1), ("proposed", 1),
                                             ("rejected", 1)])
    assert (await http.get("/v1/pending-diffs", params={
        "namespace": namespace})).json()["pending_diffs"] == []
    versions = await history(http, namespace, record_id)
    assert [(v["version"], v["text"]) for v in versions] == [(1, TEXT)]


async def test_a_draft_is_updated_freely_and_injected_once_approved(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient,
    namespace: str,
) -> None:
    async with Publisher(stack.broker.bootstrap, producer="agent-7") as publisher:
        record_id = await publisher.write_memory(namespace, TEXT, review_state="draft",
                                                 trust_class="derived")
        await publisher.update_memory(namespace, record_id, expected_version=1, text=NEW_TEXT)
        await announced(updates, record_id, [("created", 1), ("updated", 2)])
        assert await search_ids(http, namespace, "billing deploys") == []
        assert await search_ids(http, namespace, "billing deploys",
                                review_state="draft") == [record_id]
        await publisher.review_memory(namespace, record_id, decision="approve", reviewer="ana")
        await announced(updates, record_id, [("created", 1), ("updated", 2), ("approved", 3)])
    assert await search_ids(http, namespace, "billing deploys") == [record_id]
    shown = (await http.get(f"/v1/records/{record_id}", params={"namespace": namespace})).json()
    assert (shown["record"]["text"], shown["record"]["trust_class"]) == (NEW_TEXT, "approved")


async def stored_tokens(stack: Stack, record_id: str) -> int | None:
    connection = await asyncpg.connect(stack.pg_dsn)
    try:
        tokens: int | None = await connection.fetchval(
            "SELECT text_tokens FROM records WHERE record_id = $1", record_id)
    finally:
        await connection.close()
    return tokens


async def keep_tokens(stack: Stack, record_id: str, tokens: int | None) -> None:
    connection = await asyncpg.connect(stack.pg_dsn)
    try:
        await connection.execute("UPDATE records SET text_tokens = $2 WHERE record_id = $1",
                                 record_id, tokens)
    finally:
        await connection.close()


async def test_a_records_text_is_priced_once_and_the_price_follows_its_text(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient,
    namespace: str,
) -> None:
    """The record sink keeps a record's text in the model's tokens before the record is
    searchable; the count follows the text through an update, and the pack charges it (or
    counts the text itself where none is kept: a record stored before counts were)."""
    with Embedder.load(MODEL_DIR) as embedder:
        cost = dict(zip([TEXT, NEW_TEXT], embedder.token_costs([TEXT, NEW_TEXT]), strict=True))
    async with Publisher(stack.broker.bootstrap, producer="agent-7") as publisher:
        record_id = await publisher.write_memory(namespace, TEXT, review_state="draft",
                                                 trust_class="derived")
        await announced(updates, record_id, [("created", 1)])
        assert await stored_tokens(stack, record_id) == cost[TEXT]
        await publisher.update_memory(namespace, record_id, expected_version=1, text=NEW_TEXT)
        await announced(updates, record_id, [("created", 1), ("updated", 2)])
        assert await stored_tokens(stack, record_id) == cost[NEW_TEXT]
        await publisher.review_memory(namespace, record_id, decision="approve", reviewer="ana")
        await announced(updates, record_id, [("created", 1), ("updated", 2), ("approved", 3)])
        assert await stored_tokens(stack, record_id) == cost[NEW_TEXT]

    async def charged() -> int:
        pack = (await http.get("/v1/context", params={
            "namespace": namespace, "query": "billing deploys", "min_score": "0"})).json()
        costs = {item["record_id"]: item["token_cost"] for item in pack["sections"]["long_term"]}
        return int(costs[record_id])

    assert await charged() == cost[NEW_TEXT]
    await keep_tokens(stack, record_id, 777)
    assert await charged() == 777, "the pack charges the count kept, it does not count again"
    await keep_tokens(stack, record_id, None)
    assert await charged() == cost[NEW_TEXT], "with no count kept, the pack counts the text"


async def test_a_search_reads_the_term_presence_kept_with_a_record(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient,
    namespace: str,
) -> None:
    """A record's coverage of the query's terms is weighed by how fully it holds each, as
    kept with it when it was written (migration 0026), not by tokenizing its texts at every
    search; a record written before that is read from its texts, to the same support."""
    async with Publisher(stack.broker.bootstrap, producer="agent-7") as publisher:
        record_id = await publisher.write_memory(namespace, NEW_TEXT)
        await announced(updates, record_id, [("created", 1)])

    async def support() -> float:
        answer = await http.get("/v1/search", params={
            # One word of the text that the embedding does not tie to it (cosine at the
            # model's "unrelated"): the support is the words' alone.
            "namespace": namespace, "query": "host", "min_score": "0",
            "explain": "true"})
        assert answer.status_code == 200, answer.text
        return float({hit["record_id"]: hit["explain"]["support"]
                      for hit in answer.json()["hits"]}[record_id])

    async def keep_presence(presence: str | None) -> None:
        connection = await asyncpg.connect(stack.pg_dsn)
        try:
            await connection.execute(
                "UPDATE records SET term_presence = $2::text::sparsevec WHERE record_id = $1",
                record_id, presence)
        finally:
            await connection.close()

    kept = await support()
    await keep_presence(None)
    assert await support() == kept, "read from its texts: the same"
    await keep_presence("{}/536870912")
    assert await support() < kept, "kept as holding none of its terms: covers none"


async def test_replayed_lifecycle_events_change_nothing(
    stack: Stack, worker: Worker, updates: TopicReader, memory_dlq: TopicReader,
    http: httpx.AsyncClient, namespace: str,
) -> None:
    """Every lifecycle event published twice, as a producer retrying would: the same
    versions, the same announcements, no dead letter."""
    def lifecycle(event_type: str, payload: dict[str, Any]) -> bytes:
        return json.dumps({
            "event_id": uuid.uuid4().hex, "type": event_type, "namespace": namespace,
            "occurred_at": "2026-11-23T12:00:00+00:00", "producer": "replayer",
            "payload": payload,
        }).encode()

    async with Publisher(stack.broker.bootstrap, producer="replayer") as publisher:
        record_id = await publisher.write_memory(namespace, TEXT, review_state="draft")
    update = lifecycle("memory.update", {"record_id": record_id, "expected_version": 1,
                                         "text": NEW_TEXT})
    approve = lifecycle("memory.review", {"record_id": record_id, "decision": "approve",
                                          "reviewer": "ana"})
    proposal = lifecycle("memory.update", {"record_id": record_id, "expected_version": 3,
                                           "title": "Billing deploys"})
    reject = lifecycle("memory.review", {
        "record_id": record_id, "decision": "reject", "reviewer": "ana",
        "diff_id": json.loads(proposal)["event_id"]})
    deprecate = lifecycle("memory.deprecate", {"record_id": record_id, "reason": "moved"})
    restore = lifecycle("memory.restore", {"record_id": record_id, "version": 2})
    block = lifecycle("memory.block", {"agent_id": "finn", "label": "persona",
                                       "set": {"IDENTITY": "Release helper | AI"}})
    key = namespace.encode()
    sequence = [update, approve, proposal, reject, deprecate, restore, block]
    await produce(stack.broker.bootstrap, "memory.events", [(key, v) for v in sequence])
    expected = [("created", 1), ("updated", 2), ("approved", 3), ("proposed", 3),
                ("rejected", 3), ("deprecated", 4), ("restored", 5)]
    await announced(updates, record_id, expected)
    await wait_caught_up(stack.broker.bootstrap, worker.app_id, ["memory.events"])
    before = await history(http, namespace, record_id)
    persona = {"namespace": namespace, "agent_id": "finn"}
    block_before = (await http.get("/v1/blocks/persona", params=persona)).json()
    assert block_before["version"] == 1

    await produce(stack.broker.bootstrap, "memory.events", [(key, v) for v in sequence])
    await wait_caught_up(stack.broker.bootstrap, worker.app_id, ["memory.events"])
    assert changes_of(updates.messages, record_id) == expected
    assert await history(http, namespace, record_id) == before
    assert (await http.get("/v1/blocks/persona", params=persona)).json() == block_before
    assert dead_letters(memory_dlq, namespace) == []


async def test_a_memory_updated_five_times_is_promoted(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient,
    namespace: str,
) -> None:
    async with Publisher(stack.broker.bootstrap, producer="agent-7") as publisher:
        record_id = await publisher.write_memory(namespace, TEXT, review_state="draft")
        for n in range(1, 6):
            await publisher.update_memory(namespace, record_id, expected_version=n,
                                          text=f"{TEXT} Checked {n} times.")
    expected = [("created", 1), *[("updated", n) for n in range(2, 7)], ("promoted", 7)]
    await announced(updates, record_id, expected)
    versions = await history(http, namespace, record_id)
    assert [(v["change"], v["tier"]) for v in versions[-2:]] == [("updated", "active"),
                                                                 ("promoted", "short_term")]
    assert versions[-1]["changed"] == ["tier"]
    assert await search_ids(http, namespace, "billing deploys", review_state="draft",
                            tier="short_term") == [record_id]
    assert await search_ids(http, namespace, "billing deploys", review_state="draft",
                            tier="active") == []


async def test_an_expired_record_leaves_search_and_the_index(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient,
    namespace: str,
) -> None:
    expires_at = datetime.now(UTC) + timedelta(seconds=4)
    async with Publisher(stack.broker.bootstrap, producer="agent-7") as publisher:
        record_id = await publisher.write_memory(namespace, TEXT,
                                                 expires_at=expires_at.isoformat())
        kept = await publisher.write_memory(namespace, NEW_TEXT)
    await announced(updates, record_id, [("created", 1)])
    await announced(updates, kept, [("created", 1)])
    assert record_id in await search_ids(http, namespace, "billing deploys")

    await announced(updates, record_id, [("created", 1), ("expired", 2)])
    assert await search_ids(http, namespace, "billing deploys") == [kept]
    stats = (await http.get("/v1/stats", params={"namespace": namespace})).json()
    assert stats["index_points"] == 1
    versions = await history(http, namespace, record_id)
    assert [(v["change"], v["actor"], v["reason"]) for v in versions] == [
        ("created", "agent-7", None), ("expired", "retention", "its expires_at passed")]
    assert "memstream_records_expired_total" in (await http.get("/metrics")).text


async def test_a_full_block_rotates_into_archival_memory_that_search_finds(
    stack: Stack, worker: Worker, updates: TopicReader, memory_dlq: TopicReader,
    http: httpx.AsyncClient, namespace: str,
) -> None:
    notes = [f"Session {n}: discussed the essay draft about the lighthouse keeper {n}"
             for n in range(20)]
    async with Publisher(stack.broker.bootstrap, producer="agent-7") as publisher:
        await publisher.edit_block(namespace, "finn", "human",
                                   set={"USER": "Alice | High school senior",
                                        "TASK": "Brainstorm essay topics"})
        await publisher.edit_block(namespace, "finn", "human", append={"CONTEXT": notes[:10]},
                                   expected_version=1)
        rotating = await publisher.edit_block(namespace, "finn", "human",
                                              append={"CONTEXT": notes[10:]})
        stale = await publisher.edit_block(namespace, "finn", "human",
                                           set={"TASK": "Too late"}, expected_version=1)
    await memory_dlq.wait_for(lambda _: len(dead_letters(memory_dlq, namespace)) == 1)
    assert dead_letters(memory_dlq, namespace)[0][0] == "stale_version", stale

    shown = (await http.get("/v1/blocks/human", params={"namespace": namespace,
                                                        "agent_id": "finn"})).json()
    assert shown["version"] == 3 and shown["strategy"] == "adaptive"
    assert shown["chars"] <= 750 < 1200, "rotated down to half of 1,500"
    assert shown["text"].startswith("[USER] Alice | High school senior\n[TASK] Brainstorm")
    assert shown["fields"]["CONTEXT"][-1] == notes[-1], "the newest notes stay"
    (rotation,) = [v for v in shown["versions"] if v["archived_record_id"]]
    assert rotation["event_id"] == rotating and rotation["usage_before_rotation"] > 0.8
    archive_id = rotation["archived_record_id"]
    await announced(updates, archive_id, [("created", 1)])

    hits = (await http.get("/v1/search", params={
        "namespace": namespace, "query": "lighthouse keeper session 0", "agent_id": "finn",
        "min_score": "0"})).json()["hits"]
    assert hits[0]["record_id"] == archive_id
    assert hits[0]["text"].startswith("[ARCHIVED ")
    assert f"[CONTEXT] {notes[0]}" in hits[0]["text"]
    record = (await http.get(f"/v1/records/{archive_id}",
                             params={"namespace": namespace})).json()["record"]
    assert record["body"]["archived_from"] == {"label": "human", "agent_id": "finn",
                                               "version": 3}
    assert (await http.get("/v1/blocks/persona", params={
        "namespace": namespace, "agent_id": "finn"})).status_code == 404
