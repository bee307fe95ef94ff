"""The pydantic-ai toolset (memstream_client/agents/pydantic_ai.py) with a scripted model and an SDK
over an in-memory worker (httpx.MockTransport): what each tool sends and answers, each write
answered by what the worker decided (stored, restated, refused, proposed, dead-lettered, or
still pending), the run's counters of what memory kept, the one reminder, the server's search
budget as the model reads it, and memory failures answered as tool results."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from memstream_client.agents.pydantic_ai import MemoryCounters, MemoryRun
from memstream_client.sdk import AsyncMemoryClient, Retries
from processors.memory.refusal import refusal_of
from processors.recall.summary import SummaryHit, summarize
from processors.text.condense import approx_tokens
from tests.scripted_agent import Script, memory_agent

NOW = "2026-05-01T12:00:00+00:00"
BUDGET = 10


@dataclass
class FakeWorker:
    """The routes the toolset calls, over memories held in a dict; a search budget per run
    as the server keeps it (counted, refused past `BUDGET`). `down` answers every call 503.

    A write is decided as the worker decides it, and answered so within the wait it asks
    for: refused by the refusal rules, restated into a memory of the same text (twins), a
    protected memory's update proposed as a pending diff, an update of a deprecated one
    dead-lettered; `lagging` leaves writes undecided (pending) until `catch_up()`."""

    memories: dict[str, dict[str, Any]] = field(default_factory=dict)
    searches: dict[str, int] = field(default_factory=dict)
    requests: list[httpx.Request] = field(default_factory=list)
    down: bool = False
    lagging: bool = False
    # What each write became, by event id; those not decided yet, in order.
    outcomes: dict[str, dict[str, Any]] = field(default_factory=dict)
    undecided: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.down:
            return httpx.Response(503, json={"error": "Kafka is unavailable"})
        path = request.url.path
        if path == "/v1/search":
            return self.search(request.url.params)
        if path == "/v1/summary":
            return self.summary(request.url.params)
        if path.startswith("/v1/writes/"):
            # A read that waits gives a lagging worker the time to decide; one that does not
            # finds what is decided already.
            if float(request.url.params.get("wait", 0)) > 0:
                self.catch_up()
            return httpx.Response(200, json=self.answer(path.split("/")[3]))
        if path == "/v1/records":
            return self.by_ids(request.url.params.get_list("id"))
        if request.method == "POST":
            body = json.loads(request.content)
            if path != "/v1/memories" and path.split("/")[3] not in self.memories:
                return httpx.Response(404, json={"error": f"no record {path.split('/')[3]!r}"})
            self.undecided.append((path, body))
            if not self.lagging:
                self.catch_up()
            answer = self.answer(body["event_id"])
            if path == "/v1/memories":
                answer["topic"] = "memory.events"
            return httpx.Response(202 if answer["outcome"] == "pending" else 200, json=answer)
        record_id = path.split("/")[3]
        if record_id not in self.memories:
            return httpx.Response(404, json={"error": f"no record {record_id!r}"})
        return httpx.Response(200, json=lineage(record_id, self.memories[record_id]))

    def catch_up(self) -> None:
        """Decide every write not decided yet, in the order sent."""
        while self.undecided:
            path, body = self.undecided.pop(0)
            self.outcomes[body["event_id"]] = (
                self.write(body) if path == "/v1/memories"
                else self.update(path.split("/")[3], body))

    def write(self, body: dict[str, Any]) -> dict[str, Any]:
        reason = refusal_of(body["text"], body.get("title"))
        if reason is not None:
            return {"outcome": "refused", "reason": reason}
        twin = next((record_id for record_id, memory in self.memories.items()
                     if memory["text"] == body["text"]), None)
        if twin is not None:
            self.memories[twin]["version"] += 1
            return {"outcome": "restated", "record_id": twin,
                    "version": self.memories[twin]["version"]}
        record_id = f"mem_{len(self.memories)}"
        self.memories[record_id] = {**body, "version": 1}
        return {"outcome": "stored", "record_id": record_id, "version": 1}

    def update(self, record_id: str, body: dict[str, Any]) -> dict[str, Any]:
        memory = self.memories[record_id]
        assert body["expected_version"] == memory["version"]
        if memory.get("deprecated"):
            return {"outcome": "dead_lettered", "reason": "invalid_transition",
                    "detail": f"{record_id} is deprecated: restore a version of it first"}
        if memory.get("protected"):
            return {"outcome": "proposed", "record_id": record_id,
                    "version": memory["version"], "diff_id": body["event_id"]}
        memory.update({k: v for k, v in body.items() if k in ("text", "title")},
                      version=memory["version"] + 1)
        return {"outcome": "updated", "record_id": record_id, "version": memory["version"]}

    def answer(self, event_id: str) -> dict[str, Any]:
        """A write's outcome as the API answers it: decided, else pending."""
        decided = self.outcomes.get(event_id, {"outcome": "pending"})
        return {"namespace": "team-a", "event_id": event_id,
                "outcome_url": f"/v1/writes/{event_id}?namespace=team-a", **decided,
                **({} if decided["outcome"] == "pending" else {"decided_at": NOW})}

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
    assert script.tool_results(3) == [{"outcome": "stored", "record_id": "mem_1",
                                       "written": True}]
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
    assert script.tool_results(1) == [{"outcome": "stored", "memory_id": "mem_1",
                                       "created": True}]
    (read,) = script.tool_results(2)
    assert [m["content"] for m in read["memories"]] == ["Budget: $50,000."]
    assert read["not_found"] == ["mem_7"]
    assert script.tool_results(3) == [{"memory_id": "mem_1", "outcome": "updated",
                                       "applied": True, "based_on_version": 1, "version": 2}]
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


async def test_a_refused_write_is_answered_refused_and_is_not_counted_as_written(
        worker: FakeWorker, run: MemoryRun) -> None:
    script = Script([
        [("semantic_memory_search", {"query": "staging"}),
         ("write_memory", {"text": "Thanks, Ana!"})],
        "Done.",
        [("write_memory", {"text": "Staging deploys need the VPN profile from #ops."})],
        "Done, and noted the VPN profile."])
    result = await memory_agent(script).run("Deploy.", deps=run)
    assert result.output == "Done, and noted the VPN profile."
    _, refused = script.tool_results(1)
    assert refused == {"outcome": "refused", "reason": "filler", "written": False,
                       "note": "refused (filler): filler (a greeting, thanks, an "
                               "acknowledgement) and no fact; nothing was stored"}
    # The refused write did not satisfy the reminder: memory kept nothing.
    (reminder,) = script.retries()
    assert "you have not written memory" in reminder
    assert "you have not checked memory" not in reminder
    assert script.tool_results(3) == [{"outcome": "stored", "record_id": "mem_1",
                                       "written": True}]
    assert list(worker.memories) == ["mem_0", "mem_1"]
    assert run.counters == MemoryCounters(memories_written=1, checked_memories=1,
                                          memory_searches=1)


async def test_a_restatement_names_the_memory_that_holds_it_and_counts_as_written(
        worker: FakeWorker, run: MemoryRun) -> None:
    worker.memories["mem_1"] = {"text": "Q3 plan: budget $50,000.", "tier": "active",
                                "version": 1}
    script = Script([
        [("write_memory", {"text": "Staging deploys need the VPN."}),
         ("create_active_memory", {"title": "Q3", "content": "Q3 plan: budget $50,000."})],
        [("get_detailed_active_memories", {"active_memory_ids": ["mem_0"]})],
        "Done."])
    assert (await memory_agent(script).run("Deploy.", deps=run)).output == "Done."
    restated, created = script.tool_results(1)
    assert restated == {
        "outcome": "restated", "record_id": "mem_0", "written": True,
        "note": "restated: mem_0 already held this, so the write was kept in it (version 2), "
                "not as a new memory"}
    assert (created["outcome"], created["memory_id"], created["created"]) == (
        "restated", "mem_1", False)
    # No memory was made for either: no id that no memory has.
    assert list(worker.memories) == ["mem_0", "mem_1"]
    assert script.retries() == []
    assert run.counters == MemoryCounters(memories_written=2, checked_memories=1)


async def test_an_update_of_a_protected_memory_is_proposed_and_one_refused_is_not_counted(
        worker: FakeWorker, run: MemoryRun) -> None:
    worker.memories["mem_0"]["protected"] = True
    worker.memories["mem_1"] = {"text": "Old plan.", "version": 1, "deprecated": True}
    script = Script([
        [("update_active_memory", {"memory_id": "mem_0",
                                   "content": "Staging deploys go through the bastion."})],
        [("update_active_memory", {"memory_id": "mem_1", "content": "New plan."})],
        "Done.", "Done."])
    await memory_agent(script).run("Deploy.", deps=run)
    (proposed,) = script.tool_results(1)
    (update,) = worker.bodies("/v1/memories/mem_0/update")
    assert proposed == {
        "memory_id": "mem_0", "outcome": "proposed", "applied": False, "based_on_version": 1,
        "change_id": update["event_id"],
        "note": f"proposed: mem_0 is protected, so the change waits for a reviewer as pending "
                f"diff {update['event_id']}"}
    (dead,) = script.tool_results(2)
    assert (dead["outcome"], dead["applied"], dead["reason"]) == (
        "dead_lettered", False, "invalid_transition")
    assert dead["note"] == ("dead-lettered (invalid_transition): mem_1 is deprecated: restore "
                            "a version of it first; nothing was changed")
    assert "change_id" not in dead and "version" not in dead
    assert worker.memories["mem_0"]["text"] == "Staging deploys need the VPN."
    # The proposal counts (memory holds it for review); the dead-lettered update does not.
    assert run.counters == MemoryCounters(memories_written=1, checked_memories=0)
    (reminder,) = script.retries()
    assert "Before you finish: you have not checked memory. Check memory" in reminder


async def test_a_pending_write_names_no_record_and_is_counted_once_found_kept(
        worker: FakeWorker, run: MemoryRun) -> None:
    worker.lagging = True
    script = Script([
        [("semantic_memory_search", {"query": "staging"}),
         ("write_memory", {"text": "Staging deploys need the VPN profile from #ops."})],
        "Done.",
        [("check_memory_write", {"event_id": "?"})],
        "Done; the VPN profile is noted."])
    event_ids: list[str] = []

    def check_the_pending_write() -> None:
        (pending_write,) = worker.bodies("/v1/memories")
        event_ids.append(pending_write["event_id"])
        script.turns[0] = [("check_memory_write", {"event_id": pending_write["event_id"]})]

    script.meanwhile[2] = check_the_pending_write
    result = await memory_agent(script).run("Deploy.", deps=run)
    assert result.output == "Done; the VPN profile is noted."
    (event_id,) = event_ids
    _, pending = script.tool_results(1)
    assert pending == {
        "outcome": "pending", "event_id": event_id, "written": False,
        "note": "pending: the worker has not decided it yet: check_memory_write with this "
                "event_id reads what became of it; do not write it again"}
    # Read again before the reminder, still pending: not counted, and the agent is asked to
    # check it, not to write it twice.
    (reminder,) = script.retries()
    assert f"memory has not kept anything you wrote yet (still pending: event {event_id})" \
        in reminder
    assert "check_memory_write" in reminder and "you have not written memory" not in reminder
    assert script.tool_results(3) == [{"outcome": "stored", "record_id": "mem_1",
                                       "version": 1}]
    assert run.counters == MemoryCounters(memories_written=1, checked_memories=1,
                                          memory_searches=1)
    assert run.pending_writes == {}
    # The reminder's read did not wait; the tool's did.
    reads = [r.url.params.get("wait") for r in worker.requests
             if r.url.path.startswith("/v1/writes/")]
    assert reads == [None, "5.0"]


async def test_a_write_decided_before_the_run_ends_counts_without_a_check(
        worker: FakeWorker, run: MemoryRun) -> None:
    worker.lagging = True
    script = Script([
        [("get_detailed_active_memories", {"active_memory_ids": ["mem_0"]}),
         ("create_active_memory", {"title": "Deploy", "content": "Step 1: VPN requested."})],
        "Done."], meanwhile={1: worker.catch_up})
    assert (await memory_agent(script).run("Deploy.", deps=run)).output == "Done."
    (_, created) = script.tool_results(1)
    assert (created["outcome"], created["created"], "memory_id" in created) == (
        "pending", False, False)
    assert script.retries() == [] and not run.reminded
    assert run.counters == MemoryCounters(memories_written=1, checked_memories=1)
