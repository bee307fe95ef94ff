"""What each door answers for a write, on the real stack (issue 37, item 2): through the MCP
server (`memstream mcp`, as a desktop client starts it), the pydantic-ai toolset and the
command line, a plain write answers the record that holds it, a restatement the memory it
restated, a refused write why and no id, an update of a protected memory the pending diff
it became, and a write the worker dead-lettered why; never an id that no record has.

Twins are on here, at their default: a stack of its own, with a worker of the default
settings (the session's worker turns them off, tests/integration/conftest.py)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.stack import Stack, Worker
from memstream_client.agents.pydantic_ai import MemoryCounters, MemoryRun
from memstream_client.ids import memory_record_id
from memstream_client.sdk import AsyncMemoryClient
from tests.integration.test_cli import memstream
from tests.integration.test_mcp import call, over_stdio
from tests.scripted_agent import Script, memory_agent

pytestmark = pytest.mark.integration

WAIT_S = 40.0
VPN = "Deploys to staging need the office VPN."
# The same fact in other words: a twin of VPN (cosine about 0.9, tests/integration/
# test_twins.py), so written after it, it restates it.
VPN_AGAIN = "Staging deploys need the office VPN."
FILLER = "Thanks, Ana!"
LOGS = "Deploys to staging log to the ops channel."
BASTION = "Deploys to staging go through the bastion host; the VPN is no longer needed."


@pytest.fixture
def namespace() -> str:
    return f"ns-{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def memory(twin_stack: Stack, twin_worker: Worker, namespace: str,
                 tmp_path: Path) -> AsyncIterator[AsyncMemoryClient]:
    """The SDK with a key bound to the agent `deployer`."""
    key = twin_stack.make_key("--namespace", namespace, "--perm", "read,write,review",
                              "--agent", "deployer")
    async with AsyncMemoryClient(twin_worker.base_url, key=key, namespace=namespace,
                                 env={"HOME": str(tmp_path)}) as client:
        yield client


def searchable(worker: Worker, namespace: str, record_id: str, query: str) -> None:
    """Until a search finds `record_id`: then a write that restates it meets it as its twin
    (twins are found in the index). Blocking, for a scripted model's turn (a thread)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        found = httpx.get(f"{worker.base_url}/v1/search", headers=worker.headers, params={
            "namespace": namespace, "query": query, "min_score": "0"}, timeout=10).json()
        if record_id in [hit["record_id"] for hit in found["hits"]]:
            return
        time.sleep(0.2)
    raise AssertionError(f"{record_id} not searchable after {WAIT_S} s")


async def test_mcp_answers_each_writes_true_outcome(
    twin_stack: Stack, twin_worker: Worker, namespace: str, tmp_path: Path,
) -> None:
    key = twin_stack.make_key("--namespace", namespace, "--perm", "read,write", "--agent",
                              "finn")
    async with over_stdio(twin_worker, key, namespace, tmp_path) as client:
        stored = await call(client, "remember", text=VPN, tags=["ops"])
        record_id = memory_record_id(namespace, stored["event_id"])
        assert stored == {"outcome": "stored", "event_id": stored["event_id"],
                          "record_id": record_id, "version": 1}
        await asyncio.to_thread(searchable, twin_worker, namespace, record_id, VPN)

        restated = await call(client, "remember", text=VPN_AGAIN, tags=["vpn"])
        assert (restated["outcome"], restated["record_id"], restated["version"]) == (
            "restated", record_id, 2)
        assert restated["note"].startswith(f"restated: {record_id} already held this")
        assert restated["event_id"] != stored["event_id"]

        refused = await call(client, "remember", text=FILLER)
        assert (refused["outcome"], refused["reason"]) == ("refused", "filler")
        assert "record_id" not in refused and "nothing was stored" in refused["note"]

        dead = await call(client, "remember", text=LOGS, related_ids=["mem_nothing"])
        assert (dead["outcome"], dead["reason"]) == ("dead_lettered", "broken_reference")
        assert "mem_nothing" in dead["detail"] and "record_id" not in dead

        # Shared and approved, so protected: the update waits for a reviewer.
        proposed = await call(client, "update_memory", record_id=record_id,
                              expected_version=2, text=BASTION)
        assert (proposed["outcome"], proposed["record_id"], proposed["diff_id"]) == (
            "proposed", record_id, proposed["event_id"])

        # No record was made for the restatement, the refusal or the dead letter.
        read = await call(client, "get_memories", record_ids=[
            record_id, *(memory_record_id(namespace, answer["event_id"])
                         for answer in (restated, refused, dead))])
        assert [r["record_id"] for r in read["records"]] == [record_id]
        assert read["records"][0]["text"] == VPN and read["records"][0]["version"] == 2

        # Each outcome is read again by its event id; a write nobody sent is pending.
        again = await call(client, "write_outcome", event_id=restated["event_id"])
        assert {name: again[name] for name in ("outcome", "record_id", "version")} == {
            "outcome": "restated", "record_id": record_id, "version": 2}
        unknown = await call(client, "write_outcome", event_id=uuid.uuid4().hex, wait_s=0)
        assert (unknown["outcome"], "record_id" in unknown) == ("pending", False)
        assert "write_outcome" in unknown["note"]


async def test_the_toolset_answers_each_writes_true_outcome_and_counts_what_memory_kept(
    twin_worker: Worker, namespace: str, memory: AsyncMemoryClient,
) -> None:
    # An active memory of the agent's, deprecated since: an update of it is dead-lettered.
    old = await memory.write_memory("Step 1 of 3: the VPN profile is requested.",
                                    title="Billing deploy", tier="active", scope="personal")
    assert old.outcome == "stored" and old.record_id is not None
    deprecated = await memory.deprecate_memory(old.record_id, reason="the deploy is done")
    assert deprecated.outcome == "deprecated"

    run = MemoryRun(memory)
    stored_ids: list[str] = []

    def first_write_indexed() -> None:
        (_, written) = script.tool_results(1)
        stored_ids.append(written["record_id"])
        searchable(twin_worker, namespace, written["record_id"], VPN)
        # The turn after next: the next one (the restatement) is the model's already.
        script.turns[1] = [("update_active_memory", {"memory_id": written["record_id"],
                                                     "content": BASTION})]

    script = Script([
        [("semantic_memory_search", {"query": "staging deploys"}),
         ("write_memory", {"text": VPN, "title": "Staging and the VPN"})],
        [("write_memory", {"text": VPN_AGAIN}), ("write_memory", {"text": FILLER})],
        [],  # the update of the first write's record, once its id is known
        [("update_active_memory", {"memory_id": old.record_id,
                                   "content": "Step 2 of 3: the VPN profile is installed."})],
        "Deployed; noted that staging needs the VPN.",
    ], meanwhile={1: first_write_indexed})
    result = await memory_agent(script).run("Deploy to staging.", deps=run)
    assert result.output == "Deployed; noted that staging needs the VPN."
    (record_id,) = stored_ids

    _, stored = script.tool_results(1)
    assert stored == {"outcome": "stored", "record_id": record_id, "written": True}
    restated, refused = script.tool_results(2)
    assert (restated["outcome"], restated["record_id"], restated["written"]) == (
        "restated", record_id, True)
    assert (refused["outcome"], refused["reason"], refused["written"]) == (
        "refused", "filler", False)
    assert "record_id" not in refused
    (proposed,) = script.tool_results(3)
    assert (proposed["outcome"], proposed["applied"], proposed["based_on_version"]) == (
        "proposed", False, 2)
    (diff,) = (await memory.pending_diffs(record_id=record_id)).pending_diffs
    assert proposed["change_id"] == diff.diff_id
    (dead,) = script.tool_results(4)
    assert (dead["outcome"], dead["reason"], dead["applied"]) == (
        "dead_lettered", "invalid_transition", False)

    # Kept: the write, its restatement, the proposal; not the refusal nor the dead letter.
    assert run.counters == MemoryCounters(memories_written=3, checked_memories=0,
                                          memory_searches=1)
    assert script.retries() == [] and run.pending_writes == {}


async def test_a_run_whose_only_write_was_refused_is_reminded_to_write(
    memory: AsyncMemoryClient,
) -> None:
    run = MemoryRun(memory)
    script = Script([
        [("semantic_memory_search", {"query": "staging deploys"}),
         ("write_memory", {"text": FILLER})],
        "Deployed.",
        [("write_memory", {"text": "Staging deploys need the office VPN profile."})],
        "Deployed; noted the VPN profile.",
    ])
    await memory_agent(script).run("Deploy to staging.", deps=run)
    _, refused = script.tool_results(1)
    assert (refused["outcome"], refused["written"]) == ("refused", False)
    (reminder,) = script.retries()
    assert "you have not written memory" in reminder
    (kept,) = script.tool_results(3)
    assert (kept["outcome"], kept["written"]) == ("stored", True)
    assert run.counters.memories_written == 1


async def test_the_cli_shows_each_writes_outcome_and_a_reviews(
    twin_stack: Stack, twin_worker: Worker, namespace: str, memory: AsyncMemoryClient,
    tmp_path: Path,
) -> None:
    stored = await memory.write_memory(VPN)
    assert stored.record_id is not None
    await asyncio.to_thread(searchable, twin_worker, namespace, stored.record_id, VPN)
    written = {"stored": stored, "restated": await memory.write_memory(VPN_AGAIN),
               "refused": await memory.write_memory(FILLER),
               "dead_lettered": await memory.write_memory(LOGS, related_ids=["mem_nothing"])}
    proposed = await memory.update_memory(stored.record_id, expected_version=2, text=BASTION)
    assert {name: answer.outcome for name, answer in written.items()} == {
        name: name for name in written}
    assert proposed.outcome == "proposed"

    def run(*args: str) -> Any:
        return memstream(*args, "-n", namespace, url=twin_worker.base_url,
                         key=twin_stack.operator_key, home=tmp_path)

    for name, answer in {**written, "proposed": proposed}.items():
        shown = run("outcome", answer.event_id)
        assert shown.code == 0, shown.err
        lines = shown.out.splitlines()
        assert lines[:2] == [f"event:   {answer.event_id}", f"outcome: {name}"], shown.out
        held = [line for line in lines if line.startswith("record:")]
        assert held == ([] if answer.record_id is None else [f"record:  {answer.record_id}"])
        as_json = run("--json", "outcome", answer.event_id).json()
        assert (as_json["outcome"], as_json.get("record_id")) == (name, answer.record_id)
    assert "record:  " not in run("outcome", written["refused"].event_id).out
    assert "refused (filler)" in run("outcome", written["refused"].event_id).out
    assert "mem_nothing" in run("outcome", written["dead_lettered"].event_id).out
    assert f"pending diff {proposed.event_id}" in run("outcome", proposed.event_id).out
    never = run("outcome", uuid.uuid4().hex)
    assert (never.code, never.out.splitlines()[1]) == (0, "outcome: pending")
    assert "--wait 10 reads it later" in never.err

    approved = run("review", "approve", proposed.event_id, "--note", "checked")
    assert approved.code == 0, approved.err
    header, event_line, outcome_line, *_ = approved.out.splitlines()
    assert (header, outcome_line) == (f"approve of diff {proposed.event_id}:",
                                      "outcome: approved")
    assert event_line.startswith("event:   ")
    assert f"record:  {stored.record_id}" in approved.out.splitlines()
    assert (await memory.record(stored.record_id)).record.text == BASTION
    # A record that is no draft has nothing to review: dead-lettered, and the command fails.
    refused_review = run("review", "approve", stored.record_id)
    assert refused_review.code == 1, refused_review.out
    assert "outcome: dead_lettered" in refused_review.out
    assert "not a draft" in refused_review.out
