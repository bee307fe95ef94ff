"""Gaps on the real stack (docs/retrieval.md#gaps): a recall that shows nothing is an
implicit gap with its question and agent, written off the read path; a gap named in a rating
shows beside it; two wordings of one question group together (by embedding: they share
few words); a memory written later that answers the question resolves the gap with its id;
and each key sees the gaps it may, as it sees personal memories."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.kafka_io import TopicReader
from harness.stack import Stack, Worker
from memstream_client.sdk import AsyncMemoryClient
from tests.integration.conftest import updated_ids
from tests.integration.test_cli import memstream
from tests.integration.test_write_endpoints import client, posted, stored

pytestmark = pytest.mark.integration

WAIT_S = 60.0
QUESTION = "How do I rotate the API signing keys?"
# The same question in other words (cosine 0.95 to QUESTION; only "API signing keys" shared).
REWORDED = "what's the procedure for rotating API signing keys"
NAMED = "who approves access to the production database"
UNRELATED = "The cafeteria on the third floor serves lunch from noon to two."
ANSWER = ("To rotate the API signing keys, run make rotate-keys and restart the gateway; "
          "the old signing keys stay valid for 24 hours.")


async def announced(http: httpx.AsyncClient, updates: TopicReader, namespace: str,
                    text: str) -> str:
    record_id = await stored(http, {"namespace": namespace, "text": text})
    await updates.wait_for(lambda m: record_id in updated_ids(m, namespace), WAIT_S)
    return record_id


async def gaps_until(http: httpx.AsyncClient, namespace: str, status: str,
                     done: Callable[[list[dict[str, Any]]], bool]) -> list[dict[str, Any]]:
    """The key's groups of `status`, once `done` says they are as awaited (the retrieval
    log's timer writes the gaps, the keeper's groups and resolves them)."""
    groups: list[dict[str, Any]] = []
    for _ in range(int(WAIT_S / 0.25)):
        answer = await http.get("/v1/gaps", params={"namespace": namespace,
                                                    "status": status})
        assert answer.status_code == 200, answer.text
        groups = answer.json()["groups"]
        if done(groups):
            return groups
        await asyncio.sleep(0.25)
    raise AssertionError(f"the {status} gaps of {namespace} never came to be: {groups}")


def texts(group: dict[str, Any]) -> set[str]:
    return {gap["text"] for gap in group["gaps"]}


async def test_a_recall_that_finds_nothing_is_a_gap_until_a_memory_answers_it(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient,
    namespace: str, tmp_path: Path,
) -> None:
    unrelated = await announced(http, updates, namespace, UNRELATED)
    ann = stack.make_key("--namespace", namespace, "--perm", "read,write", "--agent", "ann")
    async with client(worker, ann) as as_ann:
        search = await as_ann.get("/v1/search", params={"namespace": namespace,
                                                        "query": QUESTION})
        assert search.status_code == 200, search.text
        assert search.json()["hits"] == []
        # A context pack is a recall too; the search is asked in other words.
        pack = await as_ann.get("/v1/context", params={"namespace": namespace,
                                                       "query": REWORDED})
        assert pack.status_code == 200, pack.text
        assert not any(pack.json()["sections"].values())
        # A search by related ids alone asks no question, a recall stricter than the default
        # minimum score does not say that nothing reaches it, and one narrowed by a filter
        # may have found nothing for the filter's sake: none is a gap.
        for params in ({"related_id": "mem_none"},
                       {"query": "where is the staging VPN config", "min_score": "0.9"},
                       {"query": "where is the staging VPN config", "tag": "nonesuch"}):
            assert (await as_ann.get("/v1/search", params={
                "namespace": namespace, **params})).json()["hits"] == []
        await posted(as_ann, "/v1/ratings", {"namespace": namespace, "ratings": [
            {"memory_id": unrelated, "useful": False}], "gap": NAMED,
            "gap_query": "database access"})

        both = await gaps_until(as_ann, namespace, "open", lambda groups: any(
            texts(group) == {QUESTION, REWORDED} for group in groups) and any(
            texts(group) == {NAMED} for group in groups))
        assert len(both) == 2, both
        asked = next(group for group in both if texts(group) == {QUESTION, REWORDED})
        named = next(group for group in both if texts(group) == {NAMED})
        assert (asked["agents"], asked["sources"], asked["times"], asked["gap_count"]) == (
            ["ann"], ["implicit"], 2, 2)
        assert {gap["query"] for gap in asked["gaps"]} == {QUESTION, REWORDED}
        assert (named["agents"], named["sources"], named["gaps"][0]["query"]) == (
            ["ann"], ["explicit"], "database access")
        assert asked["status"] == named["status"] == "open"
        assert asked["resolved_by"] == []

        answer = await announced(http, updates, namespace, ANSWER)
        (resolved,) = await gaps_until(as_ann, namespace, "resolved", lambda groups: bool(
            groups))
        assert texts(resolved) == {QUESTION, REWORDED}
        assert [r["record_id"] for r in resolved["resolved_by"]] == [answer]
        assert resolved["resolved_by"][0]["relevance"] >= 0.5
        assert {(gap["status"], gap["resolved_by"]) for gap in resolved["gaps"]} == {
            ("resolved", answer)}
        (still_open,) = (await as_ann.get("/v1/gaps", params={
            "namespace": namespace})).json()["groups"]
        assert texts(still_open) == {NAMED}
        async with AsyncMemoryClient(worker.base_url, key=ann, namespace=namespace,
                                     env={"HOME": str(tmp_path)}) as sdk:
            through_sdk = await sdk.gaps(status="resolved")
        (group,) = through_sdk.groups
        assert (group.group_id, group.status, group.times) == (resolved["group_id"],
                                                              "resolved", 2)
        assert {gap.resolved_by for gap in group.gaps} == {answer}
        assert [r.record_id for r in group.resolved_by] == [answer]
        assert through_sdk.next is None
        listed = memstream("gaps", "-n", namespace, "--status", "all", url=worker.base_url,
                           key=ann, home=tmp_path)
        assert listed.code == 0, listed.err
        assert listed.out.split("\n", 1)[0].split() == ["group", "status", "times", "agents",
                                                        "last", "seen"]
        assert f"(answered by {answer})" in " ".join(listed.out.split())
        assert NAMED in listed.out
        # Asked again, the question is answered: no gap is met.
        again = await as_ann.get("/v1/search", params={"namespace": namespace,
                                                       "query": QUESTION})
        assert [hit["record_id"] for hit in again.json()["hits"]][:1] == [answer]


async def test_a_key_sees_the_gaps_it_may_as_it_sees_personal_memories(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient,
    namespace: str,
) -> None:
    await announced(http, updates, namespace, UNRELATED)
    keys = {agent: stack.make_key("--namespace", namespace, "--perm", "read",
                                  "--agent", agent) for agent in ("ann", "bob")}
    keys["none"] = stack.make_key("--namespace", namespace, "--perm", "read")
    asked = {"ann": "when does Ann's team rotate the on-call pager",
             "bob": "which laptop model did Bob order",
             "none": "what is the guest wifi password policy"}
    for who, question in asked.items():
        async with client(worker, keys[who]) as reader:
            found = await reader.get("/v1/search", params={"namespace": namespace,
                                                           "query": question})
            assert found.json()["hits"] == [], found.text
    every = await gaps_until(http, namespace, "all", lambda groups: len(groups) == 3)
    assert {(group["question"], tuple(group["agents"])) for group in every} == {
        (asked["ann"], ("ann",)), (asked["bob"], ("bob",)), (asked["none"], ())}
    seen = {}
    for who in ("ann", "bob", "none"):
        async with client(worker, keys[who]) as reader:
            answer = await reader.get("/v1/gaps", params={"namespace": namespace,
                                                          "status": "all"})
            assert answer.status_code == 200, answer.text
            seen[who] = {group["question"] for group in answer.json()["groups"]}
    assert seen == {"ann": {asked["ann"], asked["none"]},
                    "bob": {asked["bob"], asked["none"]},
                    "none": {asked["none"]}}
    async with client(worker, keys["ann"]) as as_ann:
        forbidden = await as_ann.get("/v1/gaps", params={"namespace": namespace,
                                                         "agent_id": "bob"})
        assert forbidden.status_code == 403
    named = (await http.get("/v1/gaps", params={"namespace": namespace, "status": "all",
                                                "agent_id": "bob"})).json()
    assert {group["question"] for group in named["groups"]} == {asked["bob"], asked["none"]}
    # A page at a time, the most recently met first, each group once.
    first = (await http.get("/v1/gaps", params={"namespace": namespace, "status": "all",
                                                "limit": "2"})).json()
    assert len(first["groups"]) == 2 and first["next"] is not None
    rest = (await http.get("/v1/gaps", params={"namespace": namespace, "status": "all",
                                               "limit": "2", "cursor": first["next"]})).json()
    assert rest["next"] is None
    paged = [group["group_id"] for group in first["groups"] + rest["groups"]]
    assert paged == [group["group_id"] for group in every]
