"""`GET /v1/summary` on the real stack: the memories of the same search condensed within the
budget, one search of the run's budget, an agent-bound key's summary never citing another
agent's personal memory, and the LLM hook's rewrite kept only when grounded (a failing, slow or
straying hook answers the deterministic summary)."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import httpx
import pytest

from embedder.model import Embedder
from harness.kafka_io import TopicReader
from harness.stack import MODEL_DIR, Stack, Worker
from processors.recall.summary import RECORD_ID
from publisher.kafka_publisher import Publisher
from stores.index.postgres_search import RecordsSearch
from stores.postgres.stores import PostgresStores
from streams.api.queries import search_query
from streams.plumbing.llm_hook import ChatEndpoint
from streams.plumbing.metrics import Metrics
from streams.plumbing.runtime import Runtime
from streams.reads.summary import Summary, summary_of
from tests.integration.conftest import updated_ids
from tests.integration.test_llm_hook import FakeChat, answering, chat_answer, fake_chat, too_late

pytestmark = pytest.mark.integration

__all__ = ["fake_chat"]  # the fixture, shared with test_llm_hook.py
QUESTION = "do staging deploys need the VPN?"
SHARED = [
    ("Staging and the VPN", "It was set up in March by the platform team. Deploys to "
     "staging need the VPN profile from the ops vault. The profile expires every 90 days."),
    ("Staging deploy checklist", "Run the migrations first. Staging deploys fail without the "
     "VPN because the database only listens on the private network."),
    ("Production approvals", "Production deploys need two approvals in the release channel. "
     "Staging deploys need none."),
    ("Release notes", "Release notes are written by whoever cuts the release."),
]
# Per agent, a personal memory on the same topic.
AGENTS = ("ann", "bob")


@dataclass(frozen=True)
class Seeded:
    namespace: str
    shared: list[str]
    personal: dict[str, str]
    keys: dict[str, str]


@pytest.fixture(scope="module")
async def seeded(stack: Stack, worker: Worker) -> AsyncIterator[Seeded]:
    namespace = f"sum-{uuid.uuid4().hex[:8]}"
    async with TopicReader(stack.broker.bootstrap, "memory.updated") as updates:
        async with Publisher(stack.broker.bootstrap, producer="tests") as publisher:
            shared = [await publisher.write_memory(namespace, text, title=title)
                      for title, text in SHARED]
            personal = {agent: await publisher.write_memory(
                namespace, f"{agent.title()} keeps a personal VPN profile for staging deploys.",
                scope="personal", agent_id=agent) for agent in AGENTS}
        expected = {*shared, *personal.values()}
        await updates.wait_for(lambda m: expected <= set(updated_ids(m, namespace)))
    keys = {agent: stack.make_key("--namespace", namespace, "--perm", "read", "--agent", agent)
            for agent in AGENTS}
    keys["reader"] = stack.make_key("--namespace", namespace, "--perm", "read")
    yield Seeded(namespace, shared, personal, keys)


async def summary(http: httpx.AsyncClient, namespace: str, **params: Any) -> dict[str, Any]:
    answer = await http.get("/v1/summary", params={"namespace": namespace, **params})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


async def test_a_summary_cites_the_searchs_best_memories_within_its_budget(
    seeded: Seeded, http: httpx.AsyncClient,
) -> None:
    found = (await http.get("/v1/search", params={
        "namespace": seeded.namespace, "query": QUESTION})).json()
    hits = [hit["record_id"] for hit in found["hits"]]
    assert hits and set(hits) <= set(seeded.shared)
    brief = await summary(http, seeded.namespace, query=QUESTION)
    assert brief["memory_ids"] == hits, "the same search, every hit within 400 tokens"
    assert (brief["rewritten"], brief["budget_tokens"], brief["budget_exhausted"]) == (
        False, 400, False)
    assert brief["hits_found"] == brief["hits_used"] == len(hits)
    assert 0 < brief["tokens"] <= 400
    lines = brief["summary"].splitlines()
    assert lines[0].startswith(f'What memory holds about "{QUESTION}"')
    assert [re.findall(RECORD_ID, line) for line in lines[1:]] == [[hit] for hit in hits]
    # The sentences about the query, not the whole memory.
    assert "set up in March" not in brief["summary"] and "expires" not in brief["summary"]
    assert "Deploys to staging need the VPN profile from the ops vault." in brief["summary"]

    small = await summary(http, seeded.namespace, query=QUESTION, budget_tokens=60)
    assert small["tokens"] <= 60 and small["budget_tokens"] == 60
    assert small["memory_ids"] == hits[:len(small["memory_ids"])]
    assert len(small["memory_ids"]) < len(hits)

    nothing = await summary(http, seeded.namespace, query="the quarterly tax filings of Peru")
    assert nothing["memory_ids"] == [] and nothing["summary"].startswith(
        'Memory holds nothing relevant to "the quarterly tax filings of Peru"')


async def test_a_summary_is_one_search_of_the_runs_budget(
    seeded: Seeded, http: httpx.AsyncClient,
) -> None:
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    for _ in range(9):
        assert (await http.get("/v1/search", params={
            "namespace": seeded.namespace, "query": QUESTION, "run_id": run_id})).json()[
                "budget_exhausted"] is False
    tenth = await summary(http, seeded.namespace, query=QUESTION, run_id=run_id)
    assert tenth["budget_exhausted"] is False and tenth["memory_ids"]
    eleventh = await summary(http, seeded.namespace, query=QUESTION, run_id=run_id)
    assert eleventh == {"namespace": seeded.namespace, "run_id": run_id,
                        "budget_exhausted": True, "max_searches_per_run": 10,
                        "summary": None, "memory_ids": []}
    metrics = (await http.get("/metrics")).text
    assert re.search(r'memstream_search_budget_exhausted_total\{route="/v1/summary"\} [1-9]',
                     metrics)


async def test_an_agents_summary_never_cites_another_agents_personal_memory(
    worker: Worker, seeded: Seeded,
) -> None:
    everything = {"query": "staging deploys VPN profile", "min_score": "-1", "limit": "50",
                  "budget_tokens": "4000"}
    for key, own in (("ann", {seeded.personal["ann"]}), ("bob", {seeded.personal["bob"]}),
                     ("reader", set())):
        async with httpx.AsyncClient(base_url=worker.base_url, timeout=20, headers={
                "Authorization": f"Bearer {seeded.keys[key]}"}) as http:
            brief = await summary(http, seeded.namespace, **everything)
            cited = set(brief["memory_ids"]) | set(RECORD_ID.findall(brief["summary"]))
            assert cited == set(seeded.shared) | own, key
            # Asking for another agent's vault is refused, never answered from it.
            other = await http.get("/v1/summary", params={
                "namespace": seeded.namespace, "agent_id": "bob" if key == "ann" else "ann",
                **everything})
            assert other.status_code == 403, (key, other.text)


@pytest.fixture(scope="module")
async def local_runtime(stack: Stack) -> AsyncIterator[tuple[Runtime, RecordsSearch]]:
    """A runtime in this process, on the stack's Postgres, to be given an LLM hook the worker
    was not started with."""
    stores = await PostgresStores.connect(stack.pg_dsn)
    fallback = await RecordsSearch.connect(stack.pg_dsn)
    embedder = Embedder.load(MODEL_DIR, threads=1)
    runtime = Runtime(stores=stores, embedder=embedder, metrics=Metrics(),
                      producer=None, announcements=None,  # type: ignore[arg-type]
                      max_event_bytes=1024)
    yield runtime, fallback
    embedder.close()
    await fallback.close()
    await stores.close()


async def summarized(runtime: Runtime, fallback: RecordsSearch, namespace: str,
                     hook_url: str | None, timeout_s: float = 5.0) -> Summary:
    """The summary with the LLM hook at `hook_url` (none if None)."""
    query = search_query({"namespace": namespace, "query": QUESTION}, None)
    llm = None if hook_url is None else ChatEndpoint(hook_url, "small", "", timeout_s)
    try:
        return await summary_of(replace(runtime, llm=llm, metrics=Metrics()), fallback,
                                fallback, query, 200)
    finally:
        if llm is not None:
            await llm.close()


def citing(ids: Sequence[str]) -> dict[str, Any]:
    return chat_answer("Yes: staging deploys need the VPN profile from the ops vault "
                       + " ".join(f"[{memory_id}]" for memory_id in ids) + ".")


async def test_the_hooks_rewrite_is_kept_when_it_cites_the_same_memories(
    seeded: Seeded, local_runtime: tuple[Runtime, RecordsSearch],
    fake_chat: tuple[FakeChat, str],
) -> None:
    runtime, fallback = local_runtime
    fake, url = fake_chat
    plain = await summarized(runtime, fallback, seeded.namespace, None)
    ids = plain.memory_ids
    assert len(ids) >= 2 and plain.rewritten is False
    fake.reply = answering(json=citing(ids))
    brief = await summarized(runtime, fallback, seeded.namespace, url)
    assert brief.rewritten is True and brief.memory_ids == ids
    assert brief.text == citing(ids)["choices"][0]["message"]["content"]
    assert brief.tokens == runtime.embedder.token_costs([brief.text])[0] <= 200
    (request,) = fake.requests
    assert request["messages"][1]["content"] == f"Question: {QUESTION}\n\n{plain.text}"


@pytest.mark.parametrize("failure", ["error", "slow", "drops an id", "invents an id",
                                     "over the budget"])
async def test_a_failing_hook_answers_the_deterministic_summary(
    seeded: Seeded, local_runtime: tuple[Runtime, RecordsSearch],
    fake_chat: tuple[FakeChat, str], failure: str,
) -> None:
    runtime, fallback = local_runtime
    fake, url = fake_chat
    plain = await summarized(runtime, fallback, seeded.namespace, None)
    ids = plain.memory_ids
    fake.reply = {
        "error": answering(status=503, json={"error": "overloaded"}),
        "slow": too_late,
        "drops an id": answering(json=citing(ids[:-1])),
        "invents an id": answering(json=citing([*ids, "mem_" + "0" * 24])),
        "over the budget": answering(json=chat_answer(
            citing(ids)["choices"][0]["message"]["content"] + " More." * 300)),
    }[failure]
    brief = await summarized(runtime, fallback, seeded.namespace, url, timeout_s=0.5)
    assert brief == plain, failure
    assert len(fake.requests) == 1


async def test_the_hooks_outcomes_are_counted(
    seeded: Seeded, local_runtime: tuple[Runtime, RecordsSearch],
    fake_chat: tuple[FakeChat, str],
) -> None:
    runtime, fallback = local_runtime
    fake, url = fake_chat
    metrics = Metrics()
    counted = replace(runtime, metrics=metrics)
    query = search_query({"namespace": seeded.namespace, "query": QUESTION}, None)
    llm = ChatEndpoint(url, "small", "", 5.0)
    try:
        fake.reply = answering(status=500, json={})
        await summary_of(replace(counted, llm=llm), fallback, fallback, query, 200)
        ids = (await summary_of(counted, fallback, fallback, query, 200)).memory_ids
        fake.reply = answering(json=citing(ids))
        await summary_of(replace(counted, llm=llm), fallback, fallback, query, 200)
    finally:
        await llm.close()
    assert metrics.llm_hook.labels("summary", "fallback")._value.get() == 1
    assert metrics.llm_hook.labels("summary", "used")._value.get() == 1

