"""What the MCP server's writing tools answer (memstream_client/mcp_server/server.py), in-process
over an SDK on an in-memory worker (tests/unit/test_agent_toolset.py's `FakeWorker`): the outcome
the worker decided, the record that holds a write only once one does, and for a pending write the
event id `write_outcome` reads it by."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from mcp import Client

from memstream_client.mcp_server.callers import Callers
from memstream_client.mcp_server.server import memory_server
from memstream_client.sdk import AsyncMemoryClient, Retries
from tests.unit.test_agent_toolset import FakeWorker


@dataclass(frozen=True)
class OnTransport:
    """Every call with one client, over `handler` (a fake worker)."""

    handler: Any

    def client(self, headers: Mapping[str, str] | None) -> AsyncMemoryClient:
        return AsyncMemoryClient("http://worker", key="k", namespace="team-a", env={},
                                 retries=Retries(attempts=0),
                                 transport=httpx.MockTransport(self.handler))


@asynccontextmanager
async def served(callers: Callers) -> AsyncIterator[Client]:
    """The server in-process, entered and left in the test's own task (as anyio wants)."""
    async with Client(memory_server(callers)) as client:
        yield client


@pytest.fixture
def worker() -> FakeWorker:
    return FakeWorker({"mem_0": {"text": "Staging deploys need the VPN.", "version": 1}})


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def test_remember_answers_the_record_that_holds_the_write_or_why_none_does(
        worker: FakeWorker) -> None:
    async with served(OnTransport(worker)) as mcp:
        stored = await call(mcp, "remember", text="Deploys to production need a ticket.")
        restated = await call(mcp, "remember", text="Staging deploys need the VPN.")
        refused = await call(mcp, "remember", text="ok, thanks!")
    sent = worker.bodies("/v1/memories")
    assert stored == {"outcome": "stored", "event_id": sent[0]["event_id"],
                      "record_id": "mem_1", "version": 1}
    assert (restated["outcome"], restated["record_id"], restated["version"]) == (
        "restated", "mem_0", 2)
    assert restated["note"] == ("restated: mem_0 already held this, so the write was kept in "
                                "it (version 2), not as a new memory")
    assert (refused["outcome"], refused["reason"], "record_id" in refused) == (
        "refused", "filler", False)
    assert refused["note"].endswith("; nothing was stored")
    assert list(worker.memories) == ["mem_0", "mem_1"]
    # Each waited for its outcome, as long as the SDK's writes wait.
    assert {r.url.params["wait"] for r in worker.requests if r.method == "POST"} == {"5.0"}


async def test_a_pending_write_names_no_record_and_write_outcome_reads_it_later(
        worker: FakeWorker) -> None:
    worker.lagging = True
    async with served(OnTransport(worker)) as mcp:
        pending = await call(mcp, "remember", text="Deploys to production need a ticket.")
        (sent,) = worker.bodies("/v1/memories")
        still = await call(mcp, "write_outcome", event_id=sent["event_id"], wait_s=0)
        found = await call(mcp, "write_outcome", event_id=sent["event_id"])
    assert pending == {
        "outcome": "pending", "event_id": sent["event_id"],
        "note": "pending: the worker has not decided it yet: call `write_outcome` with its "
                "event_id to read what became of it; do not write it again"}
    assert (still["outcome"], "record_id" in still) == ("pending", False)
    assert found == {"outcome": "stored", "event_id": sent["event_id"], "record_id": "mem_1",
                     "version": 1}


async def test_an_update_answers_proposed_with_its_diff_or_dead_lettered_with_why(
        worker: FakeWorker) -> None:
    worker.memories["mem_0"]["protected"] = True
    worker.memories["mem_1"] = {"text": "Old plan.", "version": 1, "deprecated": True}
    async with served(OnTransport(worker)) as mcp:
        proposed = await call(mcp, "update_memory", record_id="mem_0", expected_version=1,
                              text="Staging deploys go through the bastion.")
        dead = await call(mcp, "update_memory", record_id="mem_1", expected_version=1,
                          text="New plan.")
        worker.lagging = True
        pending = await call(mcp, "update_memory", record_id="mem_0", expected_version=1,
                             text="Staging deploys go through the bastion host.")
    sent = worker.bodies("/v1/memories/mem_0/update")
    assert (proposed["outcome"], proposed["record_id"], proposed["diff_id"]) == (
        "proposed", "mem_0", sent[0]["event_id"])
    assert proposed["note"] == ("proposed: mem_0 is protected, so the change waits for a "
                                f"reviewer as pending diff {sent[0]['event_id']}")
    assert (dead["outcome"], dead["reason"], dead["detail"]) == (
        "dead_lettered", "invalid_transition",
        "mem_1 is deprecated: restore a version of it first")
    # A pending update names no record either: none holds it yet.
    assert set(pending) == {"outcome", "event_id", "note"}


async def test_a_checkpoint_answers_each_memorys_outcome_and_the_records_that_hold_them(
        ) -> None:
    decided = [{"outcome": "stored", "record_id": "mem_a", "version": 1},
               {"outcome": "refused", "reason": "too_short"},
               {"outcome": "pending"}]

    def step(request: httpx.Request) -> httpx.Response:
        """A checkpoint's or a sleep's answer, each memory's outcome as `decided` says."""
        body = json.loads(request.content)
        writes = [{"namespace": "team-a", "event_id": f"w{n}",
                   "outcome_url": f"/v1/writes/w{n}", **outcome}
                  for n, outcome in enumerate(decided[:len(body.get("memories", [1]))])]
        return httpx.Response(202, json={
            "session_id": "s1", "event_id": body["event_id"], "writes": writes,
            "record_ids": [w["record_id"] for w in writes if "record_id" in w],
            "handoff_record_id": "mem_a"})

    async with served(OnTransport(step)) as mcp:
        kept = await call(mcp, "checkpoint", session_id="s1", memories=[
            {"text": "CI runs in UTC."}, {"text": "?"}, {"text": "Deploys need a ticket."}])
        slept = await call(mcp, "sleep", session_id="s1", summary="Done.")
    assert kept["record_ids"] == ["mem_a"]
    assert [(w["outcome"], w.get("record_id")) for w in kept["writes"]] == [
        ("stored", "mem_a"), ("refused", None), ("pending", None)]
    assert kept["writes"][2]["event_id"] == "w2"
    assert "write_outcome" in kept["writes"][2]["note"]
    assert (slept["handoff_record_id"], slept["handoff"]["outcome"]) == ("mem_a", "stored")
