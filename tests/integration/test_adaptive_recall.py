"""Ratings re-rank recall on the real stack (docs/retrieval.md#adaptive-scores): an agent that
rates the memory a question found first "not useful", three times, and the one under it
"useful", finds them the other way round; another agent's recall of the same question is
unmoved; `explain=true` shows each hit's lists, fused score, profile weight, adaptive score
with its parts and its blend, in search and in the context pack; a config with no boost
gives the raw ranking back; and the Postgres fallback blends alike."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.kafka_io import TopicReader
from harness.stack import Stack, Worker
from processors.recall.ranking import PROFILES
from publisher.kafka_publisher import Publisher
from stores.index.protocol import SearchScope
from streams.reads.search import DEFAULT_MIN_SCORE, SearchQuery
from tests.integration.conftest import updated_ids
from tests.integration.test_cli import memstream
from tests.integration.test_pipeline import searched_from_postgres
from tests.integration.test_write_endpoints import client, posted

pytestmark = pytest.mark.integration

WAIT_S = 60.0
QUESTION = "How often does the staging database password rotate?"
# Two answers that only a user can tell apart (one is stale), and others. The two are of two
# types, so that the stale-fact finder does not pair them: a correction awaiting review ranks
# above what it contests whatever an agent's ratings (docs/lifecycle.md#a-correction-awaiting-
# review), and this test is about what ratings move.
TYPES = ("fact", "decision")
MEMORIES = (
    "The staging database password rotates every Monday at 09:00 UTC.",
    "The staging database password rotates every Tuesday at 09:00 UTC.",
    "The payments service retries card captures three times with backoff.",
    "Standups are at 9:30 in the small meeting room.",
    "The production database is backed up every night to the EU bucket.",
    "Ops keeps the staging cluster's kubeconfig in the team vault.",
)


async def recalled(http: httpx.AsyncClient, namespace: str, **extra: Any) -> list[dict[str, Any]]:
    answer = await http.get("/v1/search", params={"namespace": namespace, "query": QUESTION,
                                                  "explain": "true", **extra})
    assert answer.status_code == 200, answer.text
    hits: list[dict[str, Any]] = answer.json()["hits"]
    return hits


def order(hits: list[dict[str, Any]]) -> list[str]:
    return [hit["record_id"] for hit in hits]


async def rated(http: httpx.AsyncClient, namespace: str, down: str, up: str,
                times: int) -> None:
    """`times` ratings (each its own event): `down` not useful, `up` useful; then wait until
    the agent's score inputs hold them all."""
    for _ in range(times):
        await posted(http, "/v1/ratings", {"namespace": namespace, "ratings": [
            {"memory_id": down, "useful": False}, {"memory_id": up, "useful": True}]})
    for _ in range(300):
        counts = [(await http.get("/v1/memory-scores", params={
            "namespace": namespace, "memory_id": memory_id})).json()["valuation_count"]
            for memory_id in (down, up)]
        if min(counts) >= times:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the ratings were never applied: {counts}")


async def test_ratings_rerank_the_raters_recall_and_no_one_elses(
    stack: Stack, worker: Worker, updates: TopicReader, namespace: str, tmp_path: Path,
) -> None:
    async with Publisher(stack.broker.bootstrap, producer="tests") as publisher:
        ids = [await publisher.write_memory(namespace, text, memory_type=memory_type)
               for text, memory_type in zip(MEMORIES[:2], TYPES, strict=True)]
        ids += [await publisher.write_memory(namespace, text) for text in MEMORIES[2:]]
    await updates.wait_for(lambda m: set(ids) <= set(updated_ids(m, namespace)), WAIT_S)
    ann = stack.make_key("--namespace", namespace, "--perm", "read,write", "--agent", "ann")
    bob = stack.make_key("--namespace", namespace, "--perm", "read", "--agent", "bob")
    admin = stack.make_key("--namespace", namespace, "--perm", "read,admin")

    async with client(worker, ann) as ann_http, client(worker, bob) as bob_http, \
            client(worker, admin) as admin_http:
        before = await recalled(ann_http, namespace)
        first, second = order(before)[:2]
        assert {first, second} == set(ids[:2]), before
        # Within the blend's reach: at most (0.70 + 0.30) / (0.70 + 0.30 * 0.35) apart.
        assert before[1]["score"] / before[0]["score"] > 0.81, before
        unused = before[0]["explain"]["adaptive"]
        # Never rated: neutral usefulness; just recalled for the first time or never: the
        # adaptive score is the same for both, so the ranking is the raw one.
        assert unused["usefulness"] == 0.5
        assert unused["config_version"] == 0
        assert order(await recalled(bob_http, namespace))[:2] == [first, second]

        await rated(ann_http, namespace, down=first, up=second, times=3)

        after = await recalled(ann_http, namespace)
        assert order(after)[:2] == [second, first], after
        why = {hit["record_id"]: hit["explain"] for hit in after}
        assert (why[first]["adaptive"]["usefulness"], why[second]["adaptive"]["usefulness"]) \
            == (0.0, 1.0)
        for hit in after:
            explained = hit["explain"]
            adaptive = explained["adaptive"]
            assert explained["blend_factor"] == pytest.approx(
                0.70 + 0.30 * adaptive["score"], abs=1e-3)
            assert hit["score"] == pytest.approx(
                explained["fused"] * explained["profile_weight"] * explained["blend_factor"],
                abs=1e-3)
            assert adaptive["score"] >= 0.35
            # Ratings move the ranking, never the relevance that decides what is shown.
            assert hit["relevance"] == explained["relevance"] >= DEFAULT_MIN_SCORE
        assert why[first]["dense"]["rank"] is not None
        assert why[first]["lexical"]["score"] is not None

        # The score as a recall blends it, read for one memory: Ann's own, and every agent's
        # for an admin key bound to none.
        own = (await ann_http.get("/v1/memory-scores", params={
            "namespace": namespace, "memory_id": first})).json()
        assert (own["valuation_count"], own["adaptive"]["usefulness"]) == (3, 0.0)
        assert own["blend_factor"] == pytest.approx(0.70 + 0.30 * own["adaptive"]["score"],
                                                    abs=1e-3)
        # (Bob's recall is counted when the retrieval log is next written.)
        for _ in range(100):
            overseen = (await admin_http.get("/v1/memory-scores", params={
                "namespace": namespace, "memory_id": first})).json()
            users = {user["agent_id"]: user for user in overseen["agents"]}
            if set(users) == {"ann", "bob"}:
                break
            await asyncio.sleep(0.2)
        assert set(users) == {"ann", "bob"}
        assert (users["ann"]["useful_count"], users["bob"]["valuation_count"]) == (0, 0)
        assert users["bob"]["access_count"] >= 1

        # Bob's recall of the same question is Ann's before her ratings.
        bobs = await recalled(bob_http, namespace)
        assert order(bobs)[:2] == [first, second]
        assert {hit["explain"]["adaptive"]["usefulness"] for hit in bobs} == {0.5}
        # A key bound to no agent ranks by the raw score: nobody's use.
        unbound = await recalled(admin_http, namespace)
        assert order(unbound)[:2] == [first, second]
        assert {(hit["explain"]["adaptive"], hit["explain"]["blend_factor"])
                for hit in unbound} == {(None, 1.0)}

        # The CLI's table of the same: the useful one first, its adaptive score and blend.
        ran = memstream("search", QUESTION, "--explain", "-n", namespace, url=worker.base_url,
                        key=ann, home=tmp_path)
        assert ran.code == 0, ran.err
        header, *rows = [line.split() for line in ran.out.splitlines()
                         if line.split() and line.split()[0] in ("#", "1", "2")]
        assert header[:3] == ["#", "record", "ranks"]
        assert [row[1] for row in rows][:2] == [second, first]
        # (Each recall is one more access: the blends have grown a little since.)
        blends = [float(row[header.index("blend")]) for row in rows[:2]]
        assert 1.0 >= blends[0] > blends[1] >= 0.70 + 0.30 * 0.35, blends

        # With no boost, Ann's ratings leave her ranking as it was: the raw one.
        changed = await admin_http.put("/v1/memory-scoring/config", json={
            "namespace": namespace, "changes": {"blend_boost_factor": 0}})
        assert changed.status_code == 202, changed.text
        for _ in range(100):
            unboosted = await recalled(ann_http, namespace)
            if unboosted[0]["explain"]["adaptive"]["config_version"] == 1:
                break
            await asyncio.sleep(0.2)
        assert order(unboosted)[:2] == [first, second], unboosted
        assert {hit["explain"]["blend_factor"] for hit in unboosted} == {0.7}
        restored = await admin_http.put("/v1/memory-scoring/config", json={
            "namespace": namespace, "changes": {"blend_boost_factor": 0.3}})
        assert restored.status_code == 202, restored.text
        for _ in range(100):
            if (await recalled(ann_http, namespace))[0]["explain"]["adaptive"][
                    "config_version"] == 2:
                break
            await asyncio.sleep(0.2)

        pack = await ann_http.get("/v1/context", params={
            "namespace": namespace, "query": QUESTION, "explain": "true"})
        assert pack.status_code == 200, pack.text
        items = pack.json()["sections"]["long_term"]
        # The pack keeps the better of two near-duplicates: now the one Ann found useful.
        assert items[0]["record_id"] == second, items
        assert items[0]["explain"]["adaptive"]["usefulness"] == 1.0
        plain = (await ann_http.get("/v1/context", params={
            "namespace": namespace, "query": QUESTION})).json()["sections"]["long_term"]
        assert all("explain" not in item for item in plain)

    # Postgres, answering when the index is down, blends Ann's scores alike.
    async with searched_from_postgres(stack) as searched:
        for agent, expected in (("ann", [second, first]), ("bob", [first, second])):
            answer = await searched(SearchQuery(
                QUESTION, SearchScope(namespace, limit=5, min_score=DEFAULT_MIN_SCORE,
                                      agent_id=agent),
                PROFILES["default"], explain=True))
            assert answer["degraded"] is True
            assert order(answer["hits"])[:2] == expected, agent
