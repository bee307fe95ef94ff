"""A correction awaiting review is visible, on the real stack (issue 37, item 6): under the
review policy a change of owner, of version and of schedule leaves the older memory in force
but contested (by which memory, pending which diff) in search, the pack, the summary and MCP,
ranked below the newer; without it (an agent's working memory) the older is invalidated at
once. Two true facts about different subjects stay untouched; approving the diff removes the
older from recall (and a search as of the wait still shows the contest), rejecting it clears
the mark; a question only the older answers brings its correction in.

The session's worker runs the default policy: approved shared memories are protected, an
agent's personal memories in the active tier are not."""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from embedder.model import Embedder
from harness.kafka_io import TopicReader
from harness.stack import MODEL, MODEL_DIR, Stack, Worker
from processors.text.calibration import calibration_of
from publisher.kafka_publisher import Publisher
from tests.integration.test_lifecycle import announced
from tests.integration.test_mcp import call, mcp_url, over_http

pytestmark = pytest.mark.integration

__all__ = ["mcp_url"]  # the fixture, shared with test_mcp.py
AGENT = "ann"


@dataclass(frozen=True)
class Correction:
    """A fact, its correction as the stale-fact rule finds it, and the question both
    answer."""

    older: str
    newer: str
    question: str

    @functools.cached_property
    def both_packed(self) -> bool:
        """Whether the pack keeps both: two texts at the model's near-duplicate cosine or
        above are one there, and only the better ranked, the correction, is packed."""
        with Embedder.load(MODEL_DIR, threads=1) as embedder:
            older, newer = embedder.embed([self.older, self.newer], role="passage")
        return float(older @ newer) < calibration_of(MODEL.name).pack_duplicate


CORRECTIONS = {
    "owner": Correction("The billing service is owned by the payments team.",
                        "The billing service is now owned by the platform team.",
                        "which team owns the billing service"),
    "version": Correction("The search cluster runs Elasticsearch 7.10.",
                          "The search cluster runs Elasticsearch 8.11.",
                          "which Elasticsearch version does the search cluster run"),
    "schedule": Correction("The standup is at 9:00.", "The standup is now at 10:30.",
                           "when is the standup"),
}
STANDUP = CORRECTIONS["schedule"]


async def read(http: httpx.AsyncClient, route: str, namespace: str, query: str,
               **params: str) -> dict[str, Any]:
    answer = await http.get(route, params={"namespace": namespace, "query": query,
                                           "min_score": "0", **params})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def by_id(hits: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {hit["record_id"]: hit for hit in hits}


async def written_pair(stack: Stack, updates: TopicReader, namespace: str, older: str,
                       newer: str, **where: str) -> tuple[str, str]:
    """A fact memory, then another, each stored and announced before the next."""
    async with Publisher(stack.broker.bootstrap, producer="agent-ann") as publisher:
        old = await publisher.write_memory(namespace, older, memory_type="fact", **where)
        await announced(updates, old, [("created", 1)])
        new = await publisher.write_memory(namespace, newer, memory_type="fact", **where)
        await announced(updates, new, [("created", 1)])
    return old, new


async def pending_diff(http: httpx.AsyncClient, namespace: str, old: str, new: str) -> str:
    pending = (await http.get("/v1/pending-diffs", params={
        "namespace": namespace, "record_id": old})).json()["pending_diffs"]
    assert [diff["proposed"]["invalidated_by"] for diff in pending] == [new], pending
    diff_id: str = pending[0]["diff_id"]
    return diff_id


@pytest.mark.parametrize("kind", list(CORRECTIONS))
async def test_under_review_the_older_is_contested_below_the_newer_everywhere(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient, namespace: str,
    mcp_url: str, kind: str,
) -> None:
    correction = CORRECTIONS[kind]
    old, new = await written_pair(stack, updates, namespace, correction.older,
                                  correction.newer)
    await announced(updates, old, [("created", 1), ("proposed", 1)])
    diff_id = await pending_diff(http, namespace, old, new)
    contest = {"older": old, "newer": new, "diff_id": diff_id}

    found = await read(http, "/v1/search", namespace, correction.question)
    assert [hit["record_id"] for hit in found["hits"]] == [new, old]
    hits = by_id(found["hits"])
    assert hits[old]["contested"] == contest and "corrects" not in hits[old]
    assert hits[new]["corrects"] == [contest] and "contested" not in hits[new]
    assert hits[old]["invalidated_by"] is None, "in force until a reviewer decides"
    assert hits[old]["score"] < hits[new]["score"]

    pack = await read(http, "/v1/context", namespace, correction.question)
    items = by_id(pack["sections"]["long_term"])
    assert [item["record_id"] for item in pack["sections"]["long_term"]] == (
        [new, old] if correction.both_packed else [new])
    assert items[new]["corrects"] == [contest]
    if correction.both_packed:
        assert items[old]["contested"] == contest
        (line,) = pack["notes"]
        assert line.startswith(f"{old} is contested by the newer {new}")
        assert f"(pending review, diff {diff_id})" in line
    else:
        assert "notes" not in pack and pack["dropped"]["duplicate"] >= 1

    brief = await read(http, "/v1/summary", namespace, correction.question)
    assert brief["memory_ids"] == [new, old]
    assert f"[{old}] (contested by {new}, pending review)" in brief["summary"]
    assert brief["contested"] == [contest]

    key = stack.make_key("--namespace", namespace, "--perm", "read")
    async with over_http(mcp_url, {"Authorization": f"Bearer {key}",
                                   "X-Memstream-Namespace": namespace}) as client:
        recalled = await call(client, "recall", query=correction.question, min_score=0)
        assert [hit["record_id"] for hit in recalled["hits"]] == [new, old]
        assert recalled["hits"][1]["contested"] == contest
        assert recalled["hits"][0]["corrects"] == [contest]
        context = await call(client, "context", task=correction.question)
        assert context["sections"]["long_term"][0]["corrects"] == [contest]
        assert len(context.get("notes", [])) == int(correction.both_packed)
        summarized = await call(client, "summarize", query=correction.question, min_score=0)
        assert summarized["contested"] == [contest]
        assert f"(contested by {new}, pending review)" in summarized["summary"]


@pytest.mark.parametrize("kind", list(CORRECTIONS))
async def test_without_review_the_older_is_invalidated_and_nothing_is_contested(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient, namespace: str,
    kind: str,
) -> None:
    correction = CORRECTIONS[kind]
    mine = {"agent_id": AGENT}
    old, new = await written_pair(stack, updates, namespace, correction.older,
                                  correction.newer, scope="personal", **mine)
    # Working memory (personal, active) is not protected: invalidated at once.
    await announced(updates, old, [("created", 1), ("invalidated", 2)])
    found = await read(http, "/v1/search", namespace, correction.question, **mine)
    assert [hit["record_id"] for hit in found["hits"]] == [new]
    assert not {"contested", "corrects"} & set(found["hits"][0])
    pack = await read(http, "/v1/context", namespace, correction.question, **mine)
    assert [item["record_id"] for item in pack["sections"]["long_term"]] == [new]
    assert "notes" not in pack
    brief = await read(http, "/v1/summary", namespace, correction.question, **mine)
    assert (brief["memory_ids"], "contested" in brief) == ([new], False)


async def test_two_true_facts_about_different_subjects_stay_untouched(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient, namespace: str,
) -> None:
    eu, us = await written_pair(stack, updates, namespace, "The EU cluster has 3 nodes.",
                                "The US cluster has 5 nodes.")
    # The stale-fact finder takes memories in the order they were stored: once it proposed
    # the invalidation a later pair makes, it has compared the first pair too.
    old, _ = await written_pair(stack, updates, namespace, STANDUP.older, STANDUP.newer)
    await announced(updates, old, [("created", 1), ("proposed", 1)])
    await announced(updates, eu, [("created", 1)])
    await announced(updates, us, [("created", 1)])
    for record_id in (eu, us):
        pending = (await http.get("/v1/pending-diffs", params={
            "namespace": namespace, "record_id": record_id})).json()["pending_diffs"]
        assert pending == []
    found = await read(http, "/v1/search", namespace, "how many nodes does each cluster have")
    hits = by_id(found["hits"])
    assert {eu, us} <= set(hits)
    for record_id in (eu, us):
        assert not {"contested", "corrects"} & set(hits[record_id])
    pack = await read(http, "/v1/context", namespace, "how many nodes does each cluster have")
    assert {eu, us} <= {item["record_id"] for item in pack["sections"]["long_term"]}
    assert not [line for line in pack.get("notes", []) if eu in line or us in line]


async def test_approving_removes_the_older_and_as_of_the_wait_it_was_contested(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient, namespace: str,
) -> None:
    async with Publisher(stack.broker.bootstrap, producer="agent-ann") as publisher:
        old = await publisher.write_memory(namespace, STANDUP.older, memory_type="fact")
        await announced(updates, old, [("created", 1)])
        await asyncio.sleep(1.0)
        before = datetime.now(UTC)
        await asyncio.sleep(1.0)
        new = await publisher.write_memory(namespace, STANDUP.newer, memory_type="fact")
        await announced(updates, old, [("created", 1), ("proposed", 1)])
        await asyncio.sleep(1.0)
        waiting = datetime.now(UTC)
        await asyncio.sleep(1.0)
        diff_id = await pending_diff(http, namespace, old, new)
        await publisher.review_memory(namespace, old, decision="approve", reviewer="ana",
                                      diff_id=diff_id)
        await announced(updates, old, [("created", 1), ("proposed", 1), ("invalidated", 2)])

    found = await read(http, "/v1/search", namespace, STANDUP.question)
    assert [hit["record_id"] for hit in found["hits"]] == [new]
    assert not {"contested", "corrects"} & set(found["hits"][0])
    pack = await read(http, "/v1/context", namespace, STANDUP.question)
    assert [item["record_id"] for item in pack["sections"]["long_term"]] == [new]
    assert "notes" not in pack

    # Memory as it stood: before the correction, no contest; while it waited, one.
    then = await read(http, "/v1/search", namespace, STANDUP.question,
                      as_of=before.isoformat())
    assert [hit["record_id"] for hit in then["hits"]] == [old]
    assert "contested" not in then["hits"][0]
    wait = await read(http, "/v1/search", namespace, STANDUP.question,
                      as_of=waiting.isoformat())
    assert [hit["record_id"] for hit in wait["hits"]] == [new, old]
    assert wait["hits"][1]["contested"] == {"older": old, "newer": new, "diff_id": diff_id}
    pack_then = await read(http, "/v1/context", namespace, STANDUP.question,
                           as_of=waiting.isoformat())
    assert [item["record_id"] for item in pack_then["sections"]["long_term"]] == [new, old]
    assert len(pack_then["notes"]) == 1


async def test_rejecting_the_correction_clears_the_mark(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient, namespace: str,
) -> None:
    old, new = await written_pair(stack, updates, namespace, STANDUP.older, STANDUP.newer)
    await announced(updates, old, [("created", 1), ("proposed", 1)])
    diff_id = await pending_diff(http, namespace, old, new)
    async with Publisher(stack.broker.bootstrap, producer="console") as publisher:
        await publisher.review_memory(namespace, old, decision="reject", reviewer="ana",
                                      diff_id=diff_id)
    await announced(updates, old, [("created", 1), ("proposed", 1), ("rejected", 1)])
    found = await read(http, "/v1/search", namespace, STANDUP.question)
    hits = by_id(found["hits"])
    assert set(hits) == {old, new}, "both stay in force"
    for hit in hits.values():
        assert not {"contested", "corrects"} & set(hit), hit
    pack = await read(http, "/v1/context", namespace, STANDUP.question)
    assert "notes" not in pack
    brief = await read(http, "/v1/summary", namespace, STANDUP.question)
    assert "contested" not in brief and "contested" not in brief["summary"]


async def test_a_question_only_the_older_answers_brings_its_correction_in(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient, namespace: str,
) -> None:
    old, new = await written_pair(stack, updates, namespace, STANDUP.older, STANDUP.newer)
    await announced(updates, old, [("created", 1), ("proposed", 1)])
    diff_id = await pending_diff(http, namespace, old, new)
    # One hit, asked in the older's own words: the search's best is the older, and its
    # correction takes its place.
    found = await read(http, "/v1/search", namespace, STANDUP.older, limit="1")
    (hit,) = found["hits"]
    assert (hit["record_id"], hit["corrects"]) == (
        new, [{"older": old, "newer": new, "diff_id": diff_id}])
