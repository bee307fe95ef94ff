"""The review queue on the real stack (issue 18): a consolidation that leaves draft merges
puts them in `GET /v1/review-queue` beside the pending diffs, and in `memstream review`;
each is decided through the route its item names, and keys see only what they may read."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.kafka_io import Received, TopicReader
from harness.stack import Stack, Worker
from memstream_client.cli.commands import main
from publisher.kafka_publisher import Publisher

pytestmark = pytest.mark.integration

# One fact recorded three times in other words, beside its negation: the draft of issue 18
# merged the negation in; the guard keeps it out.
DEPLOYS = [
    "Deploys to staging need the VPN.",
    "Staging deploys need the VPN.",
    "A deploy to staging needs the VPN.",
]
NEGATED = "Deploys to staging go through the bastion host; the VPN is no longer needed."
APPROVALS = [
    "Production deploys need two approvals in the release channel.",
    "A deploy to production needs two approvals in the release channel.",
]
BACKUPS = "Nightly backups of the analytics warehouse are kept for thirty days."
# Ann's own: a merge of her personal memories is hers to see.
ANNS = [
    "Ann prefers her standup notes as bullet points.",
    "Ann wants her standup notes written as bullet points.",
]


def changes_for(messages: list[Received], namespace: str) -> list[tuple[str, str]]:
    bodies = [json.loads(message.value) for message in messages]
    return [(body["change"], body["record_id"]) for body in bodies
            if body["namespace"] == namespace]


def count(updates: TopicReader, namespace: str, change: str) -> int:
    return sum(seen == change for seen, _ in changes_for(updates.messages, namespace))


async def memstream(worker: Worker, key: str, home: Path, *args: str) -> tuple[int, str]:
    """`memstream ARGS` in this process (`main` with its output captured), configured by the
    environment alone."""
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as env:
        for name, value in {"MEMSTREAM_URL": worker.base_url, "MEMSTREAM_API_KEY": key,
                            "HOME": str(home), "XDG_CONFIG_HOME": str(home),
                            "COLUMNS": "250"}.items():
            env.setenv(name, value)
        env.delenv("MEMSTREAM_CONFIG", raising=False)
        env.delenv("MEMSTREAM_NAMESPACE", raising=False)
        code = await asyncio.to_thread(main, list(args), out=out, err=err)
    assert code == 0, err.getvalue()
    return code, out.getvalue()


async def queue(http: httpx.AsyncClient, namespace: str, **params: str) -> list[dict[str, Any]]:
    answer = await http.get("/v1/review-queue", params={"namespace": namespace, **params})
    assert answer.status_code == 200, answer.text
    items: list[dict[str, Any]] = answer.json()["items"]
    return items


def client(worker: Worker, token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=worker.base_url,
                             headers={"Authorization": f"Bearer {token}"}, timeout=20)


async def test_a_draft_merge_waits_in_the_review_queue_of_the_api_and_the_cli(
    stack: Stack, worker: Worker, updates: TopicReader, http: httpx.AsyncClient,
    namespace: str, tmp_path: Path,
) -> None:
    async with Publisher(stack.broker.bootstrap, producer="tests") as publisher:
        deploys = [await publisher.write_memory(namespace, text, memory_type="fact")
                   for text in DEPLOYS]
        negated = await publisher.write_memory(namespace, NEGATED, memory_type="fact")
        approvals = [await publisher.write_memory(namespace, text, memory_type="fact")
                     for text in APPROVALS]
        backups = await publisher.write_memory(namespace, BACKUPS, memory_type="fact")
        anns = [await publisher.write_memory(namespace, text, memory_type="preference",
                                             scope="personal", agent_id="ann")
                for text in ANNS]
        # The negation restates the deploys' fact with another value: each of them, approved
        # and so protected, waits to be invalidated by it (docs/knowledge.md).
        await updates.wait_for(lambda m: count(updates, namespace, "created") == 9
                               and count(updates, namespace, "proposed") == 3)
        # An approved memory is protected: its update waits as a pending diff.
        diff_id = await publisher.update_memory(
            namespace, backups, expected_version=1,
            text="Nightly backups of the analytics warehouse are kept for ninety days.")
        await updates.wait_for(lambda m: count(updates, namespace, "proposed") == 4)
        await publisher.request_consolidation(namespace)
    await updates.wait_for(lambda m: count(updates, namespace, "merged") == 3, timeout_s=120)
    assert count(updates, namespace, "superseded") == 0, "drafts supersede nothing"

    items = await queue(http, namespace)
    assert [item["kind"] for item in items] == ["pending_diff"] * 4 + ["draft_merge"] * 3, \
        "oldest first: the diffs were proposed before the consolidation"
    *invalidations, diff = items[:4]
    merges = items[4:]
    assert {(item["record_id"], item["proposed"]["invalidated_by"]) for item in invalidations} \
        == {(deploy, negated) for deploy in deploys}
    assert (diff["id"], diff["record_id"], diff["text"], diff["proposed"]["text"]) == (
        diff_id, backups, BACKUPS,
        "Nightly backups of the analytics warehouse are kept for ninety days.")
    assert diff["review"] == {"route": "POST /v1/reviews", **{
        decision: {"namespace": namespace, "decision": decision, "record_id": backups,
                   "diff_id": diff_id} for decision in ("approve", "reject")}}
    by_members = {frozenset(m["record_id"] for m in merge["members"]): merge
                  for merge in merges}
    assert set(by_members) == {frozenset(deploys), frozenset(approvals), frozenset(anns)}
    deploy_merge = by_members[frozenset(deploys)]
    assert negated not in {m["record_id"] for m in deploy_merge["members"]}, \
        "a fact and its negation are not one memory"
    assert deploy_merge["id"] == deploy_merge["record_id"]
    assert DEPLOYS[0] in deploy_merge["text"] and deploy_merge["version"] == 1
    assert {(m["excerpt"], m["review_state"], m["superseded_by"])
            for m in deploy_merge["members"]} == {(text, "approved", None) for text in DEPLOYS}
    assert deploy_merge["review"]["approve"] == {
        "namespace": namespace, "decision": "approve", "record_id": deploy_merge["id"]}
    # One record's items: its diff, and the merge that is it or merges it.
    assert [item["id"] for item in await queue(http, namespace, record_id=deploys[1])] == \
        [next(i["id"] for i in invalidations if i["record_id"] == deploys[1]),
         deploy_merge["id"]]
    assert [item["id"] for item in await queue(http, namespace, limit="2")] == \
        [item["id"] for item in items[:2]]

    # The record page lists a merge's members, live while it is a draft.
    lineage = (await http.get(f"/v1/records/{deploy_merge['id']}",
                              params={"namespace": namespace})).json()
    assert lineage["record"]["review_state"] == "draft" and lineage["supersedes"] == []
    assert [(m["record_id"], m["superseded_by"]) for m in lineage["members"]] == [
        (member, None) for member in sorted(deploys)]

    # The same key rules as every read: Ann's merge is Ann's, answered to Bob as missing.
    anns_merge = by_members[frozenset(anns)]["id"]
    for agent, sees in (("ann", True), ("bob", False)):
        token = stack.make_key("--namespace", namespace, "--perm", "read", "--agent", agent)
        async with client(worker, token) as reader:
            assert (anns_merge in {item["id"] for item in await queue(reader, namespace)}) \
                is sees
            shown = await reader.get(f"/v1/records/{anns_merge}",
                                     params={"namespace": namespace})
            assert shown.status_code == (200 if sees else 404)
    reader_token = stack.make_key("--namespace", namespace, "--perm", "read")
    async with client(worker, reader_token) as shared_reader:
        assert anns_merge not in {item["id"] for item in await queue(shared_reader, namespace)}

    # The command line lists both kinds.
    _, listed = await memstream(worker, stack.operator_key, tmp_path, "review", "-n", namespace)
    lines = listed.splitlines()
    assert lines[0].split()[:3] == ["kind", "id", "of"]
    assert any(line.split()[:3] == ["pending_diff", diff_id, backups] for line in lines)
    assert any(line.split()[:5] == ["draft_merge", deploy_merge["id"], "merge", "of", "3"]
               and DEPLOYS[0] in line for line in lines), listed
    _, as_json = await memstream(worker, stack.operator_key, tmp_path,
                                 "review", "-n", namespace, "--json")
    assert [item["id"] for item in json.loads(as_json)["items"]] == [i["id"] for i in items]

    # Approved through the route its item names: the merge replaces its members.
    review = deploy_merge["review"]
    method, route = review["route"].split()
    approved = await http.request(method, route, json=review["approve"])
    assert approved.status_code == 202, approved.text
    await updates.wait_for(lambda m: count(updates, namespace, "superseded") == 3)
    lineage = (await http.get(f"/v1/records/{deploy_merge['id']}",
                              params={"namespace": namespace})).json()
    assert lineage["record"]["review_state"] == "approved"
    assert {m["record_id"] for m in lineage["supersedes"]} == set(deploys)
    assert {(m["record_id"], m["superseded_by"]) for m in lineage["members"]} == {
        (member, deploy_merge["id"]) for member in deploys}

    # Rejected with `memstream review reject`: the merge is deprecated, its members stay.
    approvals_merge = by_members[frozenset(approvals)]["id"]
    _, rejected = await memstream(worker, stack.operator_key, tmp_path,
                                  "review", "reject", approvals_merge, "-n", namespace)
    assert rejected.startswith(f"reject of draft merge {approvals_merge}:\n")
    assert "outcome: rejected" in rejected.splitlines(), rejected
    await updates.wait_for(lambda m: ("rejected", approvals_merge) in changes_for(m, namespace))
    lineage = (await http.get(f"/v1/records/{approvals_merge}",
                              params={"namespace": namespace})).json()
    assert lineage["record"]["review_state"] == "deprecated"
    assert {(m["record_id"], m["review_state"], m["superseded_by"])
            for m in lineage["members"]} == {(member, "approved", None) for member in approvals}

    # The deploys are merged: their invalidations can no longer apply, and await nobody.
    assert [item["id"] for item in await queue(http, namespace)] == [diff_id, anns_merge]
