"""Knowledge over time on the real stack (issue 22): recall that follows links from an anchor
memory two hops out; a stale fact invalidated, out of search and the pack, still there as of
before, answered as superseded; an approved one waiting for review; replay changing nothing;
and the new parameters and routes refusing bad input with their reason.

The session's worker runs the default policy: approved shared memories take changes through
review, an agent's working memory (personal, active) changes at once."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from harness.kafka_io import TopicReader
from harness.stack import Stack, Worker
from publisher.kafka_publisher import Publisher
from tests.integration.test_lifecycle import announced

pytestmark = pytest.mark.integration

AGENT = "ann"
OLD_FACT = "The staging database runs Postgres 14 with 4 replicas."
NEW_FACT = "The staging database runs Postgres 16 with 4 replicas."
PINNED = "The payments SDK is pinned to version 4.2 for every service."
REPINNED = "The payments SDK is pinned to version 4.4 for every service."


async def found(http: httpx.AsyncClient, namespace: str, query: str,
                **params: Any) -> dict[str, Any]:
    answer = await http.get("/v1/search", params={"namespace": namespace, "query": query,
                                                  **params})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


async def entities_indexed(http: httpx.AsyncClient, namespace: str, keys: set[str],
                           timeout_s: float = 15.0) -> None:
    """Wait until the namespace's entities include `keys` (the indexer is off the write
    path)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        listed = (await http.get("/v1/entities", params={"namespace": namespace})).json()
        if keys <= {entity["key"] for entity in listed["entities"]}:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"entities {keys} not indexed in {timeout_s} s: {listed}")
        await asyncio.sleep(0.2)


def ids(answer: dict[str, Any]) -> list[str]:
    return [hit["record_id"] for hit in answer["hits"]]


async def test_an_anchor_recall_reaches_the_memories_two_hops_away(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient, namespace: str,
) -> None:
    async with Publisher(stack.broker.bootstrap, producer="tests") as publisher:
        anchor = await publisher.write_memory(
            namespace, "Atlas is the billing rewrite the team ships this quarter; card "
            "payments go through [[Payments gateway]].", title="Project: Atlas")
        gateway = await publisher.write_memory(
            namespace, "The gateway retries card captures three times and writes every "
            "charge to [[Ledger database]].", title="Payments gateway")
        ledger = await publisher.write_memory(
            namespace, "Charges are kept for seven years under the audit rules.",
            title="Ledger database")
        coffee = await publisher.write_memory(
            namespace, "The office coffee machine is descaled on Fridays.")
    for record_id in (anchor, gateway, ledger, coffee):
        await announced(updates, record_id, [("created", 1)])
    # The entity index catches up with the records a moment after they are searchable.
    await entities_indexed(http, namespace, {"atlas", "payments gateway", "ledger database"})

    plain = await found(http, namespace, "Atlas", limit="10")
    assert ids(plain) == [anchor], plain
    linked = await found(http, namespace, "Atlas", limit="10", profile="anchor")
    by_id = {hit["record_id"]: hit for hit in linked["hits"]}
    assert ids(linked)[0] == anchor and coffee not in by_id
    assert (by_id[gateway]["via"]["from"], by_id[gateway]["via"]["hops"]) == (anchor, 1)
    assert (by_id[ledger]["via"]["from"], by_id[ledger]["via"]["hops"],
            by_id[ledger]["via"]["last"]) == (anchor, 2, gateway)
    assert by_id[ledger]["score"] < by_id[gateway]["score"] < by_id[anchor]["score"]
    expanded_once = await found(http, namespace, "Atlas", limit="10", expand="1")
    assert gateway in ids(expanded_once) and ledger not in ids(expanded_once)

    async def around(start: str, depth: int) -> dict[str, int]:
        answer = await http.get("/v1/graph/neighbours", params={
            "namespace": namespace, "from": start, "depth": str(depth)})
        assert answer.status_code == 200, answer.text
        return {node["id"]: node["hops"] for node in answer.json()["nodes"]}

    two = await around(anchor, 2)
    assert (two[anchor], two[gateway], two[ledger]) == (0, 1, 2) and coffee not in two
    assert ledger not in await around(anchor, 1)
    # The entities the records mention are nodes too, and a walk may start at one.
    assert "entity:atlas" in two
    assert anchor in await around("entity:Atlas", 1)
    listed = (await http.get("/v1/entities", params={"namespace": namespace})).json()
    assert {"atlas", "payments gateway", "ledger database"} <= {
        entity["key"] for entity in listed["entities"]}
    # An entity's page: its relations with their evidence and confidence, and its records.
    atlas = (await http.get("/v1/entities/Project: Atlas",
                            params={"namespace": namespace})).json()
    assert (atlas["key"], atlas["entity_kind"]) == ("atlas", "project")
    relations = {(r["relation"], r["target"], r["origin"]): r for r in atlas["relations"]}
    linked = relations[("links_to", "payments gateway", "wiki_link")]
    assert (linked["confidence"], linked["evidence"]) == (1.0, [anchor])
    together = relations[("co_mentioned", "payments gateway", "co_mention")]
    assert together["records"] == 1 and 0 < together["confidence"] < 0.9
    assert atlas["records"] == 1
    assert [record["record_id"] for record in atlas["mentioned_by"]] == [anchor]

    # The pack's long-term section follows the links when its profile does.
    pack = (await http.get("/v1/context", params={
        "namespace": namespace, "query": "Atlas", "profile": "anchor"})).json()
    assert {anchor, gateway, ledger} <= {item["record_id"]
                                         for item in pack["sections"]["long_term"]}


async def test_a_stale_fact_leaves_recall_and_the_pack_and_as_of_still_returns_it(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient, namespace: str,
) -> None:
    mine = {"agent_id": AGENT}
    async with Publisher(stack.broker.bootstrap, producer="agent-ann") as publisher:
        old = await publisher.write_memory(namespace, OLD_FACT, scope="personal",
                                           agent_id=AGENT, memory_type="fact")
        await announced(updates, old, [("created", 1)])
        await asyncio.sleep(1.0)
        before = datetime.now(UTC)
        await asyncio.sleep(1.0)
        new_event = uuid.uuid4().hex
        new = await publisher.write_memory(namespace, NEW_FACT, scope="personal",
                                           agent_id=AGENT, memory_type="fact",
                                           event_id=new_event)
    # Working memory (personal, active) is not protected: invalidated at once.
    await announced(updates, old, [("created", 1), ("invalidated", 2)])
    await announced(updates, new, [("created", 1)])

    question = "which Postgres version does the staging database run"
    assert ids(await found(http, namespace, question, min_score="0", **mine)) == [new]
    pack = (await http.get("/v1/context", params={"namespace": namespace, "query": question,
                                                  "min_score": "0", **mine})).json()
    assert [item["record_id"] for item in pack["sections"]["long_term"]] == [new]

    then = await found(http, namespace, question, min_score="0", as_of=before.isoformat(),
                       **mine)
    assert ids(then) == [old]
    assert (then["hits"][0]["text"], then["hits"][0]["invalidated_by"]) == (OLD_FACT, new)

    record = (await http.get(f"/v1/records/{old}", params={
        "namespace": namespace, "as_of": before.isoformat()})).json()
    assert record["standing"]["in_force"] is False
    assert record["standing"]["invalidated_by"] == new
    assert record["standing"]["note"].startswith(f"superseded by {new} on ")
    assert record["record"]["valid_until"] is not None
    assert (record["as_of"]["standing"], record["as_of"]["version"]["version"]) == \
        ("in_force", 1)
    versions = (await http.get(f"/v1/records/{old}/history",
                               params={"namespace": namespace})).json()["versions"]
    assert [(v["change"], v["changed"]) for v in versions] == [
        ("created", []), ("invalidated", ["valid_until", "invalidated_by"])]
    assert "4.2" not in versions[1]["reason"] and "14 -> 16" in versions[1]["reason"]
    # As of before, the graph walks the old fact too; now, it is gone from the graph.
    walked = await http.get("/v1/graph/neighbours", params={
        "namespace": namespace, "from": new, "depth": "1", **mine})
    assert old not in {node["id"] for node in walked.json()["nodes"]}

    # A replay of the newer write changes nothing: no second invalidation, no new version.
    seen = len(updates.messages)
    async with Publisher(stack.broker.bootstrap, producer="agent-ann") as publisher:
        await publisher.write_memory(namespace, NEW_FACT, scope="personal", agent_id=AGENT,
                                     memory_type="fact", event_id=new_event)
        sentinel = await publisher.write_memory(namespace, "Sentinel: nothing else follows.")
    await announced(updates, sentinel, [("created", 1)])
    assert [json.loads(m.value)["record_id"] for m in updates.messages[seen:]
            if json.loads(m.value)["namespace"] == namespace] == [sentinel]


async def test_invalidating_an_approved_memory_waits_for_review(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient, namespace: str,
) -> None:
    async with Publisher(stack.broker.bootstrap, producer="tests") as publisher:
        old = await publisher.write_memory(namespace, PINNED, memory_type="decision")
        await announced(updates, old, [("created", 1)])
        new = await publisher.write_memory(namespace, REPINNED, memory_type="decision")
        await announced(updates, old, [("created", 1), ("proposed", 1)])
        # Still in force until a reviewer says so.
        question = "which version is the payments SDK pinned to"
        assert set(ids(await found(http, namespace, question, min_score="0"))) == {old, new}
        pending = (await http.get("/v1/pending-diffs", params={
            "namespace": namespace, "record_id": old})).json()["pending_diffs"]
        assert [diff["proposed"]["invalidated_by"] for diff in pending] == [new]
        await publisher.review_memory(namespace, old, decision="approve", reviewer="ana",
                                      diff_id=pending[0]["diff_id"])
        await announced(updates, old, [("created", 1), ("proposed", 1), ("invalidated", 2)])
    assert ids(await found(http, namespace, question, min_score="0")) == [new]
    record = (await http.get(f"/v1/records/{old}", params={"namespace": namespace})).json()
    assert record["standing"]["invalidated_by"] == new


@pytest.mark.parametrize(("route", "params", "reason"), [
    ("/v1/search", {"query": "x", "as_of": "2999-01-01"}, "as_of: must not be in the future"),
    ("/v1/search", {"query": "x", "as_of": "yesterday"}, "as_of: must be an ISO 8601"),
    ("/v1/search", {"related_id": "mem_1", "as_of": "2026-01-01"}, "as_of needs a query"),
    ("/v1/search", {"query": "x", "min_confidence": "2"}, "min_confidence: must be a number"),
    ("/v1/search", {"query": "x", "expand": "9"}, "expand: must be an integer from 0 to 3"),
    ("/v1/context", {"query": "x", "expand": "-1"}, "expand: must be an integer"),
    ("/v1/graph/neighbours", {}, "from is required"),
    ("/v1/graph/neighbours", {"from": "entity:"}, "names no entity"),
    ("/v1/graph/neighbours", {"from": "mem_1", "depth": "4"}, "depth: must be an integer"),
    ("/v1/graph/neighbours", {"from": "mem_1", "as_of": "soon"}, "as_of: must be an ISO"),
    ("/v1/entities", {"limit": "0"}, "limit: must be an integer"),
    ("/v1/records/mem_1", {"as_of": "2999-01-01"}, "as_of: must not be in the future"),
])
async def test_bad_parameters_are_refused_with_their_reason(
    http: httpx.AsyncClient, namespace: str, route: str, params: dict[str, str], reason: str,
) -> None:
    answer = await http.get(route, params={"namespace": namespace, **params})
    assert answer.status_code == 400, answer.text
    assert reason in answer.json()["error"], answer.json()


async def test_a_walk_from_what_is_not_there_is_not_found(
    http: httpx.AsyncClient, namespace: str,
) -> None:
    for start in ("mem_nothing", "entity:Nobody Here"):
        answer = await http.get("/v1/graph/neighbours", params={"namespace": namespace,
                                                                "from": start})
        assert answer.status_code == 404, answer.text
    answer = await http.get("/v1/entities/Nobody Here", params={"namespace": namespace})
    assert answer.status_code == 404 and "no entity 'Nobody Here'" in answer.json()["error"]
