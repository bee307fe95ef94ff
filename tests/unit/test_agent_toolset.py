"""The pydantic-ai toolset (client/agents/pydantic_ai.py) with a scripted model and an SDK
over an in-memory worker (httpx.MockTransport): what each tool sends and answers, the run's
counters, the one reminder, the server's search budget as the model reads it, and memory
failures answered as tool results."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from client.agents.pydantic_ai import MemoryCounters, MemoryRun
from client.sdk import AsyncMemoryClient, Retries
from processors.recall.summary import SummaryHit, summarize
from processors.text.condense import approx_tokens
from tests.scripted_agent import Script, memory_agent

NOW = "2026-05-01T12:00:00+00:00"
BUDGET = 10


@dataclass
class FakeWorker:
    """The routes the toolset calls, over memories held in a dict; a search budget per run
    as the server keeps it (counted, refused past `BUDGET`). `down` answers every call 503."""

    memories: dict[str, dict[str, Any]] = field(default_factory=dict)
    searches: dict[str, int] = field(default_factory=dict)
    requests: list[httpx.Request] = field(default_factory=list)
    down: bool = False

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.down:
            return httpx.Response(503, json={"error": "Kafka is unavailable"})
        path = request.url.path
        if path == "/v1/search":
            return self.search(request.url.params)
        if path == "/v1/summary":
            return self.summary(request.url.params)
        if path == "/v1/memories":
            body = json.loads(request.content)
            record_id = f"mem_{len(self.memories)}"
            self.memories[record_id] = {**body, "version": 1}
            return httpx.Response(202, json={"record_id": record_id,
                                             "event_id": body["event_id"],
                                             "topic": "memory.events"})
        if path == "/v1/records":
            return self.by_ids(request.url.params.get_list("id"))
        record_id = path.split("/")[3]
        if record_id not in self.memories:
            return httpx.Response(404, json={"error": f"no record {record_id!r}"})
        if path.endswith("/update"):
            body = json.loads(request.content)
            memory = self.memories[record_id]
            assert body["expected_version"] == memory["version"]
            memory.update({k: v for k, v in body.items() if k in ("text", "title")},
                          version=memory["version"] + 1)
            return httpx.Response(202, json={"record_id": record_id,
                                             "event_id": body["event_id"]})
        return httpx.Response(200, json=lineage(record_id, self.memories[record_id]))

    def search(self, params: httpx.QueryParams) -> httpx.Response:
        if not self.spend(params["run_id"]):
            return httpx.Response(200, json={**refused(params["run_id"]), "hits": []})
        return httpx.Response(200, json={"namespace": "team-a", "hits": self.found(params),
                                         "budget_exhausted": False})

    def summary(self, params: httpx.QueryParams) -> httpx.Response:
        """The worker's summary of the hits the search would answer."""
        if not self.spend(params["run_id"]):
            return httpx.Response(200, json={**refused(params["run_id"]), "summary": None,
                                             "memory_ids": []})
        made = summarize(params["query"], [
            SummaryHit(found["record_id"], found["title"], found["text"])
            for found in self.found(params)], int(params["budget_tokens"]), approx_tokens)
        return httpx.Response(200, json={
            "namespace": "team-a", "summary": made.text, "memory_ids": list(made.memory_ids),
            "rewritten": False, "budget_exhausted": False})

    def spend(self, run_id: str) -> bool:
        self.searches[run_id] = self.searches.get(run_id, 0) + 1
        return self.searches[run_id] <= BUDGET

    def found(self, params: httpx.QueryParams) -> list[dict[str, Any]]:
        words = set(params.get("query", "").lower().split())
        texts = {record_id: set(memory["text"].lower().strip(".").replace(".", " ").split())
                 for record_id, memory in self.memories.items()}
        related = set(params.get_list("related_id"))
        return [hit(record_id, memory) for record_id, memory in self.memories.items()
                if (words & texts[record_id] or not words)
                and (not related or related & set(memory.get("related_ids", [])))][:5]

    def by_ids(self, record_ids: list[str]) -> httpx.Response:
        return httpx.Response(200, json={
            "namespace": "team-a",
            "records": [{**lineage(i, self.memories[i])["record"],
                         "version": self.memories[i]["version"], "superseded_by": None}
                        for i in record_ids if i in self.memories],
            "not_found": [i for i in record_ids if i not in self.memories]})

    def bodies(self, path: str) -> list[Any]:
        return [json.loads(r.content) for r in self.requests if r.url.path == path]


def refused(run_id: str) -> dict[str, Any]:
    return {"namespace": "team-a", "run_id": run_id, "budget_exhausted": True,
            "max_searches_per_run": BUDGET}


def hit(record_id: str, memory: dict[str, Any]) -> dict[str, Any]:
    return {"record_id": record_id, "kind": "memory", "title": memory.get("title"),
            "text": memory["text"], "score": 0.9, "similarity": 0.8, "relevance": 0.7,
            "ranks": {"dense": 1, "lexical": 1}, "created_at": NOW, "source_ref": None,
            "member_source_refs": [], "scope": "shared", "memory_type": "fact",
            "tags": memory.get("tags") or [], "related_ids": memory.get("related_ids") or [],
            "tier": "active", "review_state": "approved", "trust_class": "raw"}


def lineage(record_id: str, memory: dict[str, Any]) -> dict[str, Any]:
    record = {
        "record_id": record_id, "namespace": "team-a", "record_kind": "memory",
        "scope": memory.get("scope", "shared"), "agent_id": None,
        "title": memory.get("title"), "text": memory["text"], "body": {},
        "memory_type": "fact", "tags": memory.get("tags") or [],
        "related_ids": memory.get("related_ids") or [], "tier": memory.get("tier", "active"),
        "review_state": "approved", "trust_class": "raw", "source_ref": None,
        "run_ref": None, "thread": None, "repo": None, "security_scope": None,
        "created_at": NOW, "expires_at": None, "valid_until": None, "invalidated_by": None,
        "provenance": {"source_event_id": "e", "source_topic": "memory.events",
                       "source_partition": 0, "source_offset": 0, "producer": "tests"}}
    return {"record": record, "version": memory["version"], "superseded_by": None,
            "versions": [], "supersedes": [], "members": [], "confidence": 1.0,
            "recorded_at": NOW, "standing": {"in_force": True, "note": None}}


@pytest.fixture
def worker() -> FakeWorker:
    return FakeWorker({"mem_0": {"text": "Staging deploys need the VPN.", "version": 1}})


@pytest.fixture
async def run(worker: FakeWorker) -> AsyncIterator[MemoryRun]:
    async with AsyncMemoryClient("http://worker", key="k", namespace="team-a", env={},
                                 retries=Retries(attempts=0),
                                 transport=httpx.MockTransport(worker)) as memory:
        yield MemoryRun(memory, run_id="run-1")


async def test_an_agent_that_checks_but_does_not_write_is_reminded_once_then_writes(
        worker: FakeWorker, run: MemoryRun) -> None:
    script = Script([
        [("semantic_memory_search", {"query": "staging deploys"})],
        "Deployed.",
        [("write_memory", {"text": "Staging deploys fail without the VPN profile.",
                           "title": "VPN profile", "related_ids": ["mem_0"]})],
        "Deployed, and noted the VPN profile.",
    ])
    result = await memory_agent(script).run("Deploy to staging.", deps=run)
    assert result.output == "Deployed, and noted the VPN profile."
    (found,) = script.tool_results(1)
    assert [h["record_id"] for h in found["hits"]] == ["mem_0"]
    (reminder,) = script.retries()
    assert "you have not written memory" in reminder
    assert "you have not checked memory" not in reminder
    assert script.tool_results(3) == [{"record_id": "mem_1", "written": True}]
    assert worker.bodies("/v1/memories")[0]["related_ids"] == ["mem_0"]
    assert worker.bodies("/v1/memories")[0]["source_ref"] == "run:run-1"
    assert run.counters == MemoryCounters(memories_written=1, checked_memories=1,
                                          memory_searches=1)


async def test_the_reminder_comes_once_then_the_output_is_accepted(
        worker: FakeWorker, run: MemoryRun) -> None:
    script = Script(["Done.", "Still done."])
    result = await memory_agent(script).run("Deploy to staging.", deps=run)
    assert result.output == "Still done."
    (reminder,) = script.retries()
    assert "you have not checked memory and you have not written memory" in reminder
    assert run.reminded and run.counters == MemoryCounters()
    assert worker.requests == []


async def test_a_run_that_checked_and_wrote_is_not_reminded(run: MemoryRun) -> None:
    script = Script([
        [("get_detailed_active_memories", {"active_memory_ids": ["mem_0"]}),
         ("write_memory", {"text": "Staging needs the VPN profile."})],
        "Done."])
    assert (await memory_agent(script).run("Deploy.", deps=run)).output == "Done."
    assert script.retries() == [] and not run.reminded


async def test_the_eleventh_search_of_a_run_is_refused_by_the_server(
        worker: FakeWorker, run: MemoryRun) -> None:
    script = Script([[("semantic_memory_search", {"query": f"staging {n}"})]
                     for n in range(11)] + ["Done.", "Done."])
    await memory_agent(script).run("Deploy.", deps=run)
    assert all("hits" in script.tool_results(turn)[0] for turn in range(1, 11))
    (refused,) = script.tool_results(11)
    assert refused["budget_exhausted"] and "made its 10 searches" in refused["error"]
    assert worker.searches == {"run-1": 11}
    assert run.counters.memory_searches == 11 and run.counters.checked_memories == 10


async def test_related_ids_are_validated_before_a_write(
        worker: FakeWorker, run: MemoryRun) -> None:
    script = Script([
        [("write_memory", {"text": "Too many.", "related_ids": [f"mem_{n}" for n in range(11)]})],
        [("write_memory", {"text": "Unknown.", "related_ids": ["mem_0", "mem_9"]})],
        "Done.", "Done."])
    await memory_agent(script).run("Deploy.", deps=run)
    too_many, unknown, _ = script.retries()
    assert "at most 10 related ids" in too_many
    assert "related ids 'mem_9' name no memory" in unknown
    # The ids are checked in one read.
    assert [r.url.params.get_list("id") for r in worker.requests] == [["mem_0", "mem_9"]]
    assert worker.bodies("/v1/memories") == [] and run.counters.memories_written == 0


async def test_seed_001_tools_create_read_and_update_active_memory(
        worker: FakeWorker, run: MemoryRun) -> None:
    script = Script([
        [("create_active_memory", {"title": "Q3 plan", "content": "Budget: $50,000."})],
        [("get_detailed_active_memories", {"active_memory_ids": ["mem_1", "mem_7"]})],
        [("update_active_memory", {"memory_id": "mem_1",
                                   "content": "Budget: $65,000 with influencers."})],
        "Updated the Q3 plan."])
    await memory_agent(script).run("Update the Q3 plan.", deps=run)
    assert script.tool_results(1) == [{"memory_id": "mem_1", "created": True}]
    (read,) = script.tool_results(2)
    assert [m["content"] for m in read["memories"]] == ["Budget: $50,000."]
    assert read["not_found"] == ["mem_7"]
    (updated,) = script.tool_results(3)
    assert (updated["memory_id"], updated["accepted"], updated["based_on_version"]) == (
        "mem_1", True, 1)
    assert updated["change_id"] == worker.bodies("/v1/memories/mem_1/update")[0]["event_id"]
    created = worker.bodies("/v1/memories")[0]
    assert (created["tier"], created["scope"], created["title"]) == (
        "active", "personal", "Q3 plan")
    assert worker.memories["mem_1"]["text"] == "Budget: $65,000 with influencers."
    assert run.counters == MemoryCounters(memories_written=2, checked_memories=1)


async def test_card_and_subagent_searches_count_against_the_budget(
        worker: FakeWorker, run: MemoryRun) -> None:
    worker.memories["mem_1"] = {"text": "The VPN profile lives in the ops vault.",
                                "related_ids": ["mem_0"], "version": 1}
    script = Script([
        [("card_memory_search", {"related_ids": ["mem_0", "mem_5"], "query": "VPN"})],
        [("card_memory_search", {"related_ids": ["mem_0"]})],
        [("card_memory_search", {"related_ids": [f"mem_{n}" for n in range(11)]})],
        [("subagent_memory_search", {"query": "VPN"})],
        "Done.", "Done."])
    await memory_agent(script).run("Deploy.", deps=run)
    (card,) = script.tool_results(1)
    assert [h["record_id"] for h in card["hits"]] == ["mem_1"]
    (without_query,) = script.tool_results(2)
    assert [h["record_id"] for h in without_query["hits"]] == ["mem_1"]
    assert "give 1 to 10 related ids" in script.retries()[0]
    (summary,) = script.tool_results(4)
    assert summary.startswith('What memory holds about "VPN"')
    assert "[mem_0] Staging deploys need the VPN." in summary and "[mem_1]" in summary
    (asked,) = [r.url.params for r in worker.requests if r.url.path == "/v1/summary"]
    assert (asked["run_id"], asked["min_score"], asked["limit"], asked["budget_tokens"]) == (
        "run-1", "0.5", "5", "400")
    searches = [r.url.params for r in worker.requests if r.url.path == "/v1/search"]
    assert [(s.get_list("related_id"), s.get("query")) for s in searches] == [
        (["mem_0", "mem_5"], "VPN"), (["mem_0"], None)]
    assert worker.searches == {"run-1": 3}
    assert run.counters == MemoryCounters(checked_memories=4, memory_searches=3)


async def test_memory_down_is_a_tool_result_and_the_run_goes_on(
        worker: FakeWorker, run: MemoryRun) -> None:
    worker.down = True
    script = Script([[("semantic_memory_search", {"query": "staging"}),
                      ("write_memory", {"text": "Staging needs the VPN."})],
                     "Done.", "Done."])
    assert (await memory_agent(script).run("Deploy.", deps=run)).output == "Done."
    searched, wrote = script.tool_results(1)
    assert searched["retriable"] and wrote["retriable"]
    assert "memory failed" in searched["error"]
    assert run.counters == MemoryCounters(memory_searches=1)


async def test_a_summary_past_the_budget_says_the_search_was_refused(
        worker: FakeWorker, run: MemoryRun) -> None:
    worker.searches["run-1"] = BUDGET
    script = Script([[("subagent_memory_search", {"query": "VPN"})], "Done.", "Done."])
    await memory_agent(script).run("Deploy.", deps=run)
    (refusal,) = script.tool_results(1)
    assert refusal.startswith(f"search refused: this run has made its {BUDGET} searches")
    assert run.counters == MemoryCounters(memory_searches=1)
