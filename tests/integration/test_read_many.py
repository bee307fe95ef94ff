"""Reading many records on the real stack, through the SDK: records by ids in one call, the
listing page by page while writes go on, and the search by related ids without a query; and
a key bound to one agent never meets another agent's personal memory in any of them."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from harness.kafka_io import TopicReader
from harness.stack import Stack, Worker
from memstream_client.sdk import AsyncMemoryClient
from tests.integration.test_lifecycle import announced

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class Written:
    namespace: str
    # Shared: a fact; b relates to a; c to a and b. Personal: ann's (active), bob's (to a).
    a: str
    b: str
    c: str
    ann_own: str
    bob_own: str


async def written(client: AsyncMemoryClient, updates: TopicReader, text: str,
                  **fields: object) -> str:
    record_id = (await client.write_memory(text, **fields)).record_id  # type: ignore[arg-type]
    await announced(updates, record_id, [("created", 1)])
    return record_id


@pytest.fixture
async def keys(stack: Stack, worker: Worker) -> dict[str, str]:
    # A namespace per test: the seeded memories are the same texts each time, which a
    # consolidator running in the same session would merge across tests.
    namespace = f"ns-read-many-{uuid.uuid4().hex[:8]}"
    return {"namespace": namespace, **{
        agent: stack.make_key("--namespace", namespace, "--perm", "read,write",
                              "--agent", agent) for agent in ("ann", "bob")}}


@pytest.fixture
async def ann(worker: Worker, keys: dict[str, str]) -> AsyncIterator[AsyncMemoryClient]:
    async with AsyncMemoryClient(worker.base_url, key=keys["ann"],
                                 namespace=keys["namespace"], env={}) as client:
        yield client


@pytest.fixture
async def bob(worker: Worker, keys: dict[str, str]) -> AsyncIterator[AsyncMemoryClient]:
    async with AsyncMemoryClient(worker.base_url, key=keys["bob"],
                                 namespace=keys["namespace"], env={}) as client:
        yield client


@pytest.fixture
async def seeded(ann: AsyncMemoryClient, bob: AsyncMemoryClient,
                 updates: TopicReader) -> Written:
    a = await written(ann, updates, "Releases ship on Tuesdays. Never on Fridays.",
                      title="Release day", memory_type="decision")
    b = await written(ann, updates, "The release checklist lives in the ops wiki.",
                      related_ids=[a])
    c = await written(bob, updates, "Tuesday releases need the on-call rota signed.",
                      related_ids=[a, b])
    ann_own = await written(ann, updates, "Ann drafts the release notes this quarter.",
                            scope="personal", tier="active", related_ids=[a, b])
    bob_own = await written(bob, updates, "Bob's note: the Friday freeze is firm.",
                            scope="personal", related_ids=[a, b])
    return Written(ann.config.namespace or "", a, b, c, ann_own, bob_own)


async def test_records_by_ids_in_one_call_in_the_order_asked(
        ann: AsyncMemoryClient, seeded: Written) -> None:
    asked = [seeded.c, seeded.bob_own, seeded.a, "mem_missing", seeded.ann_own, seeded.a]
    found = await ann.records(asked)
    assert [r.record_id for r in found.records] == [seeded.c, seeded.a, seeded.ann_own]
    # Another agent's personal memory is missing, exactly as one that does not exist.
    assert found.not_found == [seeded.bob_own, "mem_missing"]
    first = found.records[0]
    assert (first.version, first.superseded_by, first.related_ids) == (
        1, None, [seeded.a, seeded.b])


async def test_the_listing_shows_what_the_key_may_read_newest_first(
        ann: AsyncMemoryClient, bob: AsyncMemoryClient, seeded: Written) -> None:
    listed = await ann.list_records(kind="memory", limit=200)
    ids = [item.record_id for item in listed.records]
    assert seeded.bob_own not in ids and seeded.ann_own in ids
    assert ids.index(seeded.ann_own) < ids.index(seeded.c) < ids.index(seeded.a)
    assert [i.created_at for i in listed.records] == sorted(
        (i.created_at for i in listed.records), reverse=True)
    release = next(item for item in listed.records if item.record_id == seeded.a)
    assert (release.title, release.description, release.memory_type) == (
        "Release day", "Releases ship on Tuesdays.", "decision")
    # Seed 001's summaries of one worker: its active memories.
    own = await ann.list_records(scope="personal", tier="active")
    assert [item.record_id for item in own.records][:1] == [seeded.ann_own]
    assert seeded.bob_own in [i.record_id for i in
                              (await bob.list_records(agent="bob", limit=200)).records]
    # Bob's records, as Ann may see them: the shared ones only.
    by_bob = {i.record_id for i in (await ann.list_records(agent="bob", limit=200)).records}
    assert seeded.c in by_bob and seeded.bob_own not in by_bob


async def test_pages_neither_repeat_nor_skip_while_records_are_written(
        worker: Worker, stack: Stack, updates: TopicReader) -> None:
    namespace = "ns-read-many-pages"
    async with AsyncMemoryClient(worker.base_url, key=stack.operator_key, namespace=namespace,
                                 env={}) as client:
        before = [await written(client, updates, f"Paged memory number {n}.")
                  for n in range(7)]
        seen: list[str] = []
        cursor: str | None = None
        pages = 0
        while True:
            page = await client.list_records(limit=3, cursor=cursor)
            seen += [item.record_id for item in page.records]
            pages += 1
            # Written between two pages: newer than the cursor, never in the pages after.
            await written(client, updates, f"Written while paging, after page {pages}.")
            cursor = page.next
            if cursor is None:
                break
    assert pages == 3 and len(seen) == len(set(seen))
    assert seen == list(reversed(before))


async def test_search_by_related_ids_without_a_query(
        ann: AsyncMemoryClient, bob: AsyncMemoryClient, seeded: Written) -> None:
    found = await ann.search(related_id=[seeded.a, seeded.b], limit=10)
    hits = [(hit.record_id, hit.shared_related_ids) for hit in found.hits]
    # Those that list both ids first (the newest first among them), then those with one.
    assert hits == [(seeded.ann_own, [seeded.a, seeded.b]), (seeded.c, [seeded.a, seeded.b]),
                    (seeded.b, [seeded.a])]
    assert found.query is None and found.hits[0].similarity is None
    assert found.hits[0].relevance == 1.0 and found.hits[2].relevance == 0.5
    # Bob sees his own personal memory, and never Ann's.
    bobs = [hit.record_id for hit in (await bob.search(related_id=[seeded.a, seeded.b],
                                                       limit=10)).hits]
    assert bobs[:2] == [seeded.bob_own, seeded.c] and seeded.ann_own not in bobs
    # With a query too, the relation filters what the query ranks.
    ranked = await ann.search("on-call rota", related_id=[seeded.a], min_score=0.0, limit=10)
    assert {hit.record_id for hit in ranked.hits} <= {seeded.b, seeded.c, seeded.ann_own}
    assert ranked.hits[0].record_id == seeded.c


async def test_a_related_search_spends_the_runs_budget(
        ann: AsyncMemoryClient, seeded: Written) -> None:
    answers = await asyncio.gather(*(ann.search(related_id=seeded.a, run_id="run-read-many")
                                     for _ in range(11)))
    assert sorted(answer.budget_exhausted for answer in answers) == [False] * 10 + [True]
