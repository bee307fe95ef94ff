"""The read half on the real stack: hybrid search with filters, the context pack with its
sections (the agent's core blocks first), budget, provenance and fail-open parts, the search
budget per run, and the retrieval log."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import httpx
import pytest

from embedder.model import Embedder
from harness.kafka_io import TopicReader, wait_caught_up
from harness.stack import MODEL_DIR, Stack, Worker
from processors.recall.ranking import PROFILES
from publisher.kafka_publisher import Publisher
from stores.index.factory import open_index
from stores.index.postgres_search import RecordsSearch
from stores.index.protocol import SearchIndex
from stores.postgres.stores import PostgresStores
from streams.api.queries import context_query as query_of
from streams.api.queries import scope_of
from streams.api.rendering import context_answer
from streams.plumbing.config import MemoryFlags
from streams.plumbing.metrics import Metrics
from streams.plumbing.runtime import Runtime
from streams.reads.context import ContextQuery, build_context
from streams.reads.search import hybrid_search
from tests.integration.conftest import updated_ids

pytestmark = pytest.mark.integration

TRACE = ("Traceback (most recent call last):\n  File \"app/cache.py\", line 42, in load_user\n"
         "    return USERS[user_id]\nKeyError: 'user-{n}'")
MEMORIES = [
    ("The staging database only accepts connections over the office VPN.", "fact"),
    ("We decided to pin the payment SDK to 4.2 because 4.3 drops refunds.", "decision"),
    ("Deploys to production need two approvals in the release channel.", "lesson"),
    ("Caroline prefers summaries as bullet points, not prose.", "preference"),
    ("The user cache is warmed lazily since the boot-time warm-up kept timing out.", "lesson"),
]


@dataclass(frozen=True)
class Seeded:
    namespace: str
    memories: dict[str, str]
    failed_run: str
    fixing_run: str


@pytest.fixture(scope="module")
async def seeded(stack: Stack, worker: Worker) -> AsyncIterator[Seeded]:
    """A namespace with memories, a draft and a deprecated one, a failed run and the run that
    fixed its error."""
    namespace = f"ctx-{uuid.uuid4().hex[:8]}"
    failed, fixed = (f"run-{uuid.uuid4().hex[:6]}" for _ in range(2))
    async with TopicReader(stack.broker.bootstrap, "memory.updated") as updates:
        async with Publisher(stack.broker.bootstrap, producer="tests") as publisher:
            memories = {await publisher.write_memory(namespace, text, memory_type=kind,
                                                     tags=["ops"] if n % 2 else []): text
                        for n, (text, kind) in enumerate(MEMORIES)}
            draft = await publisher.write_memory(
                namespace, "The staging database will move to a new VPN next quarter.",
                review_state="draft")
            deprecated = await publisher.write_memory(
                namespace, "The staging database accepts connections from anywhere.",
                review_state="deprecated")
            task = {"task_key": "CACHE-1", "repo": "acme/web"}
            await publisher.run_started(namespace, run_id=failed,
                                        intent="Warm the user cache on boot", **task)
            await publisher.run_step(namespace, run_id=failed, kind="error",
                                     error=TRACE.format(n=7))
            await publisher.run_finished(namespace, run_id=failed, status="failed",
                                         error=TRACE.format(n=7))
            await publisher.run_started(namespace, run_id=fixed,
                                        intent="Warm the user cache on boot", **task)
            await publisher.run_step(namespace, run_id=fixed, kind="decision",
                                     text="Load users lazily instead of at boot.")
            await publisher.run_finished(namespace, run_id=fixed, status="succeeded",
                                         commits=["c0ffee1"], files_changed=["app/cache.py"])
        expected = set(memories) | {draft, deprecated}
        await updates.wait_for(lambda m: expected <= set(updated_ids(m, namespace)))
        await wait_caught_up(stack.broker.bootstrap, worker.app_id, ["runs.events"])
        await updates.wait_for(lambda m: sum(
            record_id.startswith(("dig_", "fix_"))
            for record_id in updated_ids(m, namespace)) >= 3)
    yield Seeded(namespace, memories, failed, fixed)


async def context(http: httpx.AsyncClient, namespace: str, **params: Any) -> dict[str, Any]:
    answer = await http.get("/v1/context", params={"namespace": namespace, **params})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


async def test_the_context_pack_puts_what_fixed_the_error_first_then_memories(
    seeded: Seeded, http: httpx.AsyncClient,
) -> None:
    pack = await context(http, seeded.namespace, query="warm the user cache at boot",
                         error=TRACE.format(n=9))
    history, memories = pack["sections"]["history"], pack["sections"]["long_term"]
    assert history and memories
    assert history[0]["kind"] == "fix_pattern", "the error's own fix pattern comes first"
    assert "c0ffee1" in str(history[0]["provenance"]) or "c0ffee1" in history[0]["text"]
    assert any(item["kind"] == "run_digest" for item in history)
    assert {item["kind"] for item in memories} == {"memory"}
    for item in history + memories:
        assert item["provenance"]["source_event_id"]
        assert item["trust_class"] in ("raw", "derived", "approved")
        assert item["token_cost"] > 0 and item["source"]
        assert item["recency"]["created_at"]
    assert pack["tokens"] == sum(item["token_cost"] for item in history + memories)
    assert pack["tokens"] <= pack["budget_tokens"] == 2000
    assert pack["degraded"] == []


async def test_an_agents_pack_starts_with_its_own_core_blocks_within_the_budget(
    stack: Stack, worker: Worker, seeded: Seeded, http: httpx.AsyncClient,
) -> None:
    async with Publisher(stack.broker.bootstrap, producer="tests") as publisher:
        await publisher.edit_block(seeded.namespace, "ann", "human", set={
            "USER": "Caroline | release manager", "TASK": "Get the VPN fixed for staging"},
            append={"CONTEXT": ["ann-marker: deploys wait for the VPN"]})
        await publisher.edit_block(seeded.namespace, "ann", "persona",
                                   set={"ROLE": "Keeps staging deployable"})
        await publisher.edit_block(seeded.namespace, "bob", "human",
                                   set={"USER": "bob-marker: Dana | payments"})
    await wait_caught_up(stack.broker.bootstrap, worker.app_id, ["memory.events"])
    ann = stack.make_key("--namespace", seeded.namespace, "--perm", "read", "--agent", "ann")
    async with httpx.AsyncClient(base_url=worker.base_url, timeout=10,
                                 headers={"Authorization": f"Bearer {ann}"}) as as_ann:
        pack = await context(as_ann, seeded.namespace, query="staging database VPN")
        core = pack["core"]
        assert (core["agent_id"], core["absent"], core["truncated"]) == ("ann", None, False)
        assert [block["label"] for block in core["blocks"]] == ["human", "persona"]
        assert core["blocks"][0]["text"] == (
            "[USER] Caroline | release manager\n[TASK] Get the VPN fixed for staging\n"
            "[CONTEXT] ann-marker: deploys wait for the VPN")
        items = pack["sections"]["history"] + pack["sections"]["long_term"]
        assert items, "the rest of the budget still packs memories"
        assert core["tokens"] == sum(block["token_cost"] for block in core["blocks"]) > 0
        assert pack["tokens"] == core["tokens"] + sum(item["token_cost"] for item in items)
        assert core["tokens"] <= core["share_tokens"] == pack["budget_tokens"] // 2
        assert "bob-marker" not in str(pack)

        # Over their share of a small budget, the blocks lose fields, named, never silently.
        tight = await context(as_ann, seeded.namespace, query="staging database VPN",
                              budget_tokens="24")
        assert tight["core"]["truncated"] and tight["core"]["tokens"] <= 12
        assert [block["label"] for block in tight["core"]["blocks"]] == ["human", "persona"]
        left_out = {block["label"]: block["fields_left_out"]
                    for block in tight["core"]["blocks"]}
        assert left_out["human"], left_out
        assert tight["tokens"] <= 24

        # Ann's key may not read the pack as Bob.
        assert (await as_ann.get("/v1/context", params={
            "namespace": seeded.namespace, "query": "payments", "agent_id": "bob"})
        ).status_code == 403

    # An admin key names the agent; without one, no agent and so no core, said so.
    as_bob = await context(http, seeded.namespace, query="payments", agent_id="bob")
    assert [block["text"] for block in as_bob["core"]["blocks"]] == [
        "[USER] bob-marker: Dana | payments"]
    assert "ann-marker" not in str(as_bob)
    nobody = await context(http, seeded.namespace, query="staging database VPN")
    assert (nobody["core"]["agent_id"], nobody["core"]["blocks"]) == (None, [])
    assert nobody["core"]["absent"].startswith("no agent")


async def test_the_budget_holds_and_drafts_and_deprecated_stay_out_unless_asked(
    seeded: Seeded, http: httpx.AsyncClient,
) -> None:
    small = await context(http, seeded.namespace, query="staging database VPN",
                          budget_tokens="30")
    items = small["sections"]["history"] + small["sections"]["long_term"]
    assert small["tokens"] <= 30 and sum(i["token_cost"] for i in items) == small["tokens"]
    assert (await context(http, seeded.namespace, query="staging database VPN",
                          budget_tokens="0"))["tokens"] == 0
    # Each section says its share of the budget and what its items took; the shares asked
    # for replace the defaults, and a share that is not one is refused.
    full = await context(http, seeded.namespace, query="warm the user cache at boot",
                         error=TRACE.format(n=9), budget_tokens="400")
    assert list(full["section_tokens"]) == ["planning", "history", "long_term", "documents"]
    for name, use in full["section_tokens"].items():
        assert use["tokens"] == sum(i["token_cost"] for i in full["sections"][name])
        assert use["items"] == len(full["sections"][name])
    assert sum(use["share_tokens"] for use in full["section_tokens"].values()) <= 400
    history_only = await context(http, seeded.namespace, query="warm the user cache at boot",
                                 error=TRACE.format(n=9), budget_tokens="400",
                                 shares="planning=0,history=1,long_term=0,documents=0")
    assert history_only["section_tokens"]["history"]["share_tokens"] == 400
    assert history_only["section_tokens"]["history"]["tokens"] >= \
        full["section_tokens"]["history"]["tokens"]
    refused = await http.get("/v1/context", params={
        "namespace": seeded.namespace, "query": "cache", "shares": "history=2"})
    assert refused.status_code == 400 and "shares: history: a share is in [0, 1]" in \
        refused.json()["error"]

    def texts(answer: dict[str, Any]) -> list[str]:
        return [hit["text"] for hit in answer["hits"]]

    query = {"namespace": seeded.namespace, "query": "does the staging database need the VPN",
             "min_score": "0", "limit": "20"}
    live = (await http.get("/v1/search", params=query)).json()
    assert not any("next quarter" in t or "anywhere" in t for t in texts(live))
    asked = (await http.get("/v1/search", params={**query, "review_state": "draft"})).json()
    assert [t for t in texts(asked) if "next quarter" in t]
    assert all(hit["review_state"] == "draft" for hit in asked["hits"])


async def test_filters_narrow_the_search(seeded: Seeded, http: httpx.AsyncClient) -> None:
    base = {"namespace": seeded.namespace, "query": "what do we know", "min_score": "-1",
            "limit": "50"}

    async def kinds(**params: str) -> set[tuple[str, str | None]]:
        hits = (await http.get("/v1/search", params={**base, **params})).json()["hits"]
        return {(hit["kind"], hit["memory_type"]) for hit in hits}

    assert await kinds(memory_type="decision") >= {("memory", "decision")}
    assert {t for k, t in await kinds(memory_type="decision") if k == "memory"} == {"decision"}
    tagged = (await http.get("/v1/search", params={**base, "tag": "ops"})).json()["hits"]
    assert tagged and all("ops" in hit["tags"] for hit in tagged)
    assert await kinds(since="2999-01-01") == set()
    assert await kinds(kind="memory", tier="long_term") == set()


async def test_the_eleventh_search_of_a_run_is_refused(seeded: Seeded,
                                                       http: httpx.AsyncClient) -> None:
    run_id = f"budget-{uuid.uuid4().hex[:6]}"
    params = {"namespace": seeded.namespace, "query": "VPN", "run_id": run_id}
    answers = [(await http.get("/v1/search", params=params)).json() for _ in range(9)]
    answers.append(await context(http, seeded.namespace, query="VPN", run_id=run_id))
    assert not any(answer["budget_exhausted"] for answer in answers)
    eleventh = (await http.get("/v1/search", params=params)).json()
    assert eleventh["budget_exhausted"] is True and eleventh["hits"] == []
    refused = await context(http, seeded.namespace, query="VPN", run_id=run_id)
    assert refused["budget_exhausted"] is True and refused["sections"] == {}
    other = (await http.get("/v1/search", params={**params, "run_id": f"{run_id}-b"})).json()
    assert other["budget_exhausted"] is False


async def test_every_record_surfaced_is_logged(stack: Stack, seeded: Seeded,
                                               http: httpx.AsyncClient) -> None:
    run_id = f"log-{uuid.uuid4().hex[:6]}"
    hits = (await http.get("/v1/search", params={
        "namespace": seeded.namespace, "query": "VPN staging", "run_id": run_id,
        "agent_id": "ann", "min_score": "0"})).json()["hits"]
    assert hits
    connection = await asyncpg.connect(stack.pg_dsn)
    try:
        for _ in range(50):
            rows = await connection.fetch(
                "SELECT record_id, rank, agent_id, route, query_hash FROM memory_retrieval_log"
                " WHERE run_id = $1 ORDER BY rank", run_id)
            if rows:
                break
            await asyncio.sleep(0.1)
    finally:
        await connection.close()
    assert [row["record_id"] for row in rows] == [hit["record_id"] for hit in hits]
    assert [row["rank"] for row in rows] == list(range(1, len(hits) + 1))
    assert {(row["agent_id"], row["route"]) for row in rows} == {("ann", "/v1/search")}
    assert "VPN" not in rows[0]["query_hash"], "the query itself is not kept"


class UnreachableIndex:
    """Failure injection: an index whose every read fails."""

    async def search(self, *args: object) -> list[object]:
        raise ConnectionError("qdrant is down")

    search_lexical = search
    term_counts = search


@pytest.fixture(scope="module")
async def local_runtime(stack: Stack) -> AsyncIterator[tuple[Runtime, RecordsSearch]]:
    """A runtime in this process, on the stack's Postgres, for reads with parts made to fail
    and with flags the worker was not started with."""
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


async def packed(runtime: Runtime, index: SearchIndex, fallback: SearchIndex,
                 flags: MemoryFlags, query: ContextQuery) -> dict[str, Any]:
    """The pack as /v1/context answers it."""
    pack = await build_context(runtime, index, fallback,  # type: ignore[arg-type]
                               flags, query)
    return dict(json.loads(context_answer(pack).rendered()))


def context_query(namespace: str, flags: MemoryFlags, **params: str) -> ContextQuery:
    # A query both sections answer: the VPN memory, and the runs that warmed the cache.
    query = "staging VPN, and warming the user cache at boot"
    return query_of({"namespace": namespace, "query": query, **params}, flags,
                    params.get("agent_id"))


async def test_with_the_index_down_the_pack_comes_from_postgres_and_says_so(
    seeded: Seeded, local_runtime: tuple[Runtime, RecordsSearch],
) -> None:
    runtime, fallback = local_runtime
    flags = MemoryFlags()
    down = await packed(runtime, UnreachableIndex(), fallback,  # type: ignore[arg-type]
                               flags, context_query(seeded.namespace, flags))
    assert down["degraded"] == ["index"]
    assert down["sections"]["long_term"] and down["sections"]["history"]
    live = await packed(runtime, fallback, fallback, flags,
                               context_query(seeded.namespace, flags))
    assert [i["record_id"] for i in down["sections"]["long_term"]] == \
        [i["record_id"] for i in live["sections"]["long_term"]]


async def test_each_flag_does_what_it_says(
    seeded: Seeded, local_runtime: tuple[Runtime, RecordsSearch],
) -> None:
    runtime, fallback = local_runtime
    no_history = MemoryFlags(history=False)
    pack = await packed(runtime, fallback, fallback, no_history,
                               context_query(seeded.namespace, no_history))
    assert pack["sections"]["history"] == [] and pack["sections"]["long_term"]
    no_memories = MemoryFlags(long_term=False)
    pack = await packed(runtime, fallback, fallback, no_memories,
                               context_query(seeded.namespace, no_memories))
    assert pack["sections"]["long_term"] == [] and pack["sections"]["history"]
    budget = MemoryFlags(context_budget_tokens=12)
    pack = await packed(runtime, fallback, fallback, budget,
                               context_query(seeded.namespace, budget))
    assert pack["budget_tokens"] == 12 and pack["tokens"] <= 12
    closed = MemoryFlags(fail_open=False)
    with pytest.raises(ConnectionError):
        await build_context(runtime, UnreachableIndex(), UnreachableIndex(),  # type: ignore[arg-type]
                            closed, context_query(seeded.namespace, closed))
    opened = MemoryFlags()
    pack = await packed(runtime, UnreachableIndex(), UnreachableIndex(),  # type: ignore[arg-type]
                               opened, context_query(seeded.namespace, opened))
    assert pack["degraded"] == ["documents", "history", "long_term"] and pack["tokens"] == 0
    no_documents = MemoryFlags(documents=False)
    pack = await packed(runtime, UnreachableIndex(), UnreachableIndex(),  # type: ignore[arg-type]
                               no_documents, context_query(seeded.namespace, no_documents))
    assert pack["degraded"] == ["history", "long_term"]


async def test_disabled_memory_answers_an_empty_pack(worker: Worker, stack: Stack) -> None:
    disabled = stack.worker("disabled", index_url=f"edge://{stack.root / 'index-disabled'}",
                            MEMORY_ENABLED="false")
    disabled.start()
    try:
        async with httpx.AsyncClient(base_url=disabled.base_url, headers=disabled.headers,
                                     timeout=10) as client:
            answer = (await client.get("/v1/context", params={
                "namespace": "any", "query": "anything"})).json()
    finally:
        disabled.stop()
    assert answer["enabled"] is False and answer["sections"] == {}


async def test_with_postgres_down_the_pack_is_empty_and_still_answers(
    stack: Stack, seeded: Seeded, http: httpx.AsyncClient,
) -> None:
    stack.postgres.stop()
    try:
        pack = await context(http, seeded.namespace, query="staging VPN")
    finally:
        stack.postgres.start()
    assert pack["degraded"] == ["documents", "history", "long_term"]
    assert pack["tokens"] == 0


async def test_the_degraded_search_ranks_with_the_same_fusion_as_the_live_one(
    stack: Stack, seeded: Seeded, worker: Worker,
    local_runtime: tuple[Runtime, RecordsSearch],
) -> None:
    runtime, fallback = local_runtime
    # The worker holds the embedded index; the same points, rebuilt into another backend,
    # stand for the live index here.
    index = open_index("pg://", pg_dsn=stack.pg_dsn, collection=f"t{uuid.uuid4().hex[:8]}")
    await index.ensure_collection()
    try:
        from stores.index.reindex import reindex

        await reindex(stack.pg_dsn, index, namespace=seeded.namespace)
        for text in ("staging database VPN", "who approves production deploys",
                     "payment SDK refunds", "user cache warm-up"):
            scope = scope_of({}, seeded.namespace, 10, -1.0, PROFILES["default"], None)
            live = await hybrid_search(runtime, index, fallback, text, scope,
                                       PROFILES["default"])
            degraded = await hybrid_search(runtime, fallback, fallback, text, scope,
                                           PROFILES["default"])
            assert [h.record.record_id for h in live.hits] == \
                [h.record.record_id for h in degraded.hits], text
            assert [round(h.score, 6) for h in live.hits] == \
                [round(h.score, 6) for h in degraded.hits], text
    finally:
        await index.close()
