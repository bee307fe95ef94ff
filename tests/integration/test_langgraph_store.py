"""The LangGraph store backed by memstream (issue 38, item 4; client/agents/langgraph_store.py)
on the real stack, through the SDK with a key of the namespace: put, get, update, delete and
put again, search with a filter and a query, list_namespaces, from `batch` and from `abatch`;
the same operations answer as LangGraph's InMemoryStore answers them (scores aside); a
compiled StateGraph keeps what one node writes for a later node and a later run; values come
back as they were put, and no item's memory is folded into another's or invalidated by it,
with write-time twins at their default too. docs/agents.md's example runs as written."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, GetOp, Item, PutOp, SearchItem, SearchOp
from langgraph.store.memory import InMemoryStore

from harness.stack import Stack, Worker
from memstream_client.agents.langgraph_store import MemstreamStore, MemstreamStoreError
from memstream_client.sdk import MemoryClient

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 40.0


def made(stack: Stack, worker: Worker, namespace: str, home: Path) -> MemstreamStore:
    key = stack.make_key("--namespace", namespace, "--perm", "read,write")
    return MemstreamStore(worker.base_url, key=key, namespace=namespace,
                          env={"HOME": str(home)})


@pytest.fixture
def store(stack: Stack, worker: Worker, namespace: str, tmp_path: Path
          ) -> Iterator[MemstreamStore]:
    made_store = made(stack, worker, namespace, tmp_path)
    yield made_store
    made_store.close()


@pytest.fixture
async def astore(stack: Stack, worker: Worker, namespace: str, tmp_path: Path
                 ) -> AsyncIterator[MemstreamStore]:
    made_store = made(stack, worker, namespace, tmp_path)
    yield made_store
    made_store.close()
    await made_store.aclose()


def seen(items: list[SearchItem] | list[Item]) -> list[tuple[tuple[str, ...], str, Any]]:
    return [(item.namespace, item.key, item.value) for item in items]


def until(found: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not found():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not within {WAIT_S} s")
        time.sleep(0.2)


def test_put_get_update_delete_and_put_again_keep_one_record(store: MemstreamStore) -> None:
    namespace = ("users", "alice")
    store.put(namespace, "prefs", {"theme": "dark", "language": "en"})
    first = store.get(namespace, "prefs")
    assert first is not None
    assert (first.namespace, first.key, first.value) == (
        namespace, "prefs", {"theme": "dark", "language": "en"})
    record_id = store.record_id(namespace, "prefs")
    memory = store.client
    held = memory.record(record_id)
    # A draft (an update applies at once), its own repo, tagged by its prefixes, titled.
    assert (held.version, held.record.review_state, held.record.memory_type) == (
        1, "draft", "fact")
    assert held.record.repo is not None and held.record.repo.startswith("langgraph:")
    assert held.record.title == "LangGraph users/alice/prefs"
    assert held.record.source_ref == "langgraph:users/alice/prefs"
    assert len(held.record.tags) == 3 and "langgraph" in held.record.tags
    assert first.created_at == held.record.created_at
    # A get and a search answer the same item, times included.
    assert store.search(namespace) == [first]

    store.put(namespace, "prefs", {"theme": "light"})
    second = store.get(namespace, "prefs")
    assert second is not None and second.value == {"theme": "light"}
    assert second.created_at == first.created_at and second.updated_at > first.updated_at
    assert memory.record(record_id).version == 2
    assert store.search(namespace) == [second]
    # A put of the value it holds changes nothing: no new version.
    store.put(namespace, "prefs", {"theme": "light"})
    assert memory.record(record_id).version == 2

    store.delete(namespace, "prefs")
    assert store.get(namespace, "prefs") is None
    assert memory.record(record_id).record.review_state == "deprecated"
    assert store.search(("users",)) == []
    store.delete(namespace, "prefs")  # deleting what is deleted changes nothing
    store.delete(namespace, "never-put")
    assert memory.record(record_id).version == 3

    store.put(namespace, "prefs", {"theme": "solarized"})
    again = store.get(namespace, "prefs")
    assert again is not None and again.value == {"theme": "solarized"}
    history = memory.record_history(record_id).versions
    # Restored (the version before the delete), then updated: one record, its whole history.
    assert [version.change for version in history] == [
        "created", "updated", "deprecated", "restored", "updated"]
    assert memory.record(record_id).record.review_state == "draft"


VALUES: dict[str, dict[str, Any]] = {
    "unicode": {"name": "Zoë Ångström", "city": "東京", "emoji": "🚀", "rtl": "שלום"},
    "escapes": {"text": "line one\nline two\ttabbed \"quoted\" \\ back\\slash",
                "nul": "a\x00b", "surrogate": "\ud800 lone"},
    "nested": {"a": [1, 2.5, True, None, {"b": []}], "empty": {}, "zero": 0, "neg": -1e-9},
    "low-value": {"ok": "thanks"},
    "empty": {},
    "wiki": {"note": "see [[Another page]] and http://example.com/x?y=1"},
}


def test_a_value_comes_back_as_it_was_put(store: MemstreamStore) -> None:
    """Values no memory text would keep as such (too short to be worth keeping, filler, no
    content words, U+0000, a lone surrogate, newlines, wiki links) are kept exactly: the
    item is the memory's text, written so that nothing of it is refused or cleaned."""
    for key, value in VALUES.items():
        store.put(("values",), key, value)
    for key, value in VALUES.items():
        got = store.get(("values",), key)
        assert got is not None and got.value == value, key
    odd_key = "a/b\nc"
    store.put(("values", "odd"), odd_key, {"kept": True})
    got = store.get(("values", "odd"), odd_key)
    assert got is not None and (got.key, got.value) == (odd_key, {"kept": True})
    listed = {item.key: item.value for item in store.search(("values",), limit=20)}
    assert listed == {**VALUES, odd_key: {"kept": True}}
    # Memory keeps no secret: a value the worker stores redacted is not the value put.
    with pytest.raises(MemstreamStoreError, match="redacted"):
        store.put(("values",), "secret", {"api_key": "sk-live-0123456789abcdefghij"})
    kept = store.get(("values",), "secret")
    assert kept is not None and kept.value["api_key"].startswith("[REDACTED:")
    with pytest.raises(ValueError, match="more than the 8000"):
        store.put(("values",), "huge", {"text": "x" * 8000})
    with pytest.raises(ValueError, match="is not JSON"):
        store.put(("values",), "a-set", {"tags": {"a", "b"}})
    assert store.get(("values",), "huge") is None


def test_items_alike_stay_apart(store: MemstreamStore) -> None:
    """Items whose memories read as one statement with another value, which memstream's
    stale-fact rule takes for a correction of the older (`8080 -> 8081`; `Alice -> Bob`,
    processors/knowledge/stale_facts.py `changed`), and two of one value, are each kept as
    put: each item's memory has a repo of its own, which no write-time rule crosses."""
    items = [(("billing",), "port", {"port": 8080}), (("billing",), "port2", {"port": 8081}),
             (("team", "billing"), "owner", {"fact": "Alice owns the billing service."}),
             (("team", "payments"), "owner", {"fact": "Bob owns the billing service."}),
             (("ops",), "copy-1", {"fact": "The staging database resets every Sunday."}),
             (("ops",), "copy-2", {"fact": "The staging database resets every Sunday."})]
    for namespace, key, value in items:
        store.put(namespace, key, value)
    time.sleep(3.0)  # the stale-fact finder's ticks (0.5 s)
    memory = store.client
    for namespace, key, value in items:
        lineage = memory.record(store.record_id(namespace, key))
        assert lineage.standing.in_force and lineage.record.invalidated_by is None, key
        assert lineage.version == 1, key
        got = store.get(namespace, key)
        assert got is not None and got.value == value
    assert len(store.search(())) == len(items)


def test_search_filters_pages_and_ranks_by_a_query(store: MemstreamStore) -> None:
    docs = ("docs",)
    store.put(docs, "vpn", {"text": "Staging deploys need the office VPN profile.",
                            "kind": "ops", "priority": 3})
    store.put(docs, "lunch", {"text": "The team orders pizza every Friday at noon.",
                              "kind": "social", "priority": 1})
    store.put(docs, "db", {"text": "The staging database is reset every Sunday at 02:00 UTC.",
                           "kind": "ops", "priority": 2})
    store.put(("other",), "vpn", {"text": "Production deploys need the VPN too.",
                                  "kind": "ops", "priority": 5})
    # Without a query: in the order put; a filter on value fields, limit and offset.
    assert [item.key for item in store.search(docs)] == ["vpn", "lunch", "db"]
    assert [item.key for item in store.search(docs, filter={"kind": "ops"})] == ["vpn", "db"]
    assert [item.key for item in store.search(docs, filter={"priority": {"$gte": 2}},
                                              limit=1, offset=1)] == ["db"]
    assert [item.key for item in store.search(docs, filter={"kind": {"$ne": "ops"}})] == [
        "lunch"]
    assert [(item.namespace, item.key) for item in store.search((), filter={"kind": "ops"})
            ] == [(docs, "vpn"), (docs, "db"), (("other",), "vpn")]
    assert all(item.score is None for item in store.search(docs))

    # With a query: every item of the prefix that meets the filter, the ranked ones first.
    def ranked() -> bool:
        hits = store.search(docs, query="which network do staging deploys need?")
        return len(hits) == 3 and all(hit.score is not None for hit in hits)

    until(ranked, "every item ranked by the index")
    hits = store.search(docs, query="which network do staging deploys need?")
    assert hits[0].key == "vpn" and hits[0].value["kind"] == "ops"
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)
    lunch = store.search(docs, query="what does the team eat on Fridays?", limit=1)
    assert [hit.key for hit in lunch] == ["lunch"]
    filtered = store.search(docs, query="which network do staging deploys need?",
                            filter={"kind": "ops"}, limit=1, offset=1)
    assert [hit.key for hit in filtered] == ["db"]
    # An item a moment after its put, before the index holds it, is found all the same.
    store.put(docs, "fresh", {"text": "Fresh note.", "kind": "ops", "priority": 0})
    assert "fresh" in {hit.key for hit in store.search(docs, query="fresh note", limit=10)}


def test_list_namespaces_with_prefix_suffix_depth_and_pages(store: MemstreamStore) -> None:
    for namespace in [("a", "b", "c"), ("a", "b", "d"), ("a", "e"), ("f", "b", "c"),
                      ("a", "b", "c", "g")]:
        store.put(namespace, "k", {"v": 1})
    assert store.list_namespaces() == [("a", "b", "c"), ("a", "b", "c", "g"), ("a", "b", "d"),
                                       ("a", "e"), ("f", "b", "c")]
    assert store.list_namespaces(prefix=("a", "b")) == [("a", "b", "c"), ("a", "b", "c", "g"),
                                                        ("a", "b", "d")]
    assert store.list_namespaces(suffix=("b", "c")) == [("a", "b", "c"), ("f", "b", "c")]
    assert store.list_namespaces(prefix=("*", "b")) == [
        ("a", "b", "c"), ("a", "b", "c", "g"), ("a", "b", "d"), ("f", "b", "c")]
    assert store.list_namespaces(max_depth=2) == [("a", "b"), ("a", "e"), ("f", "b")]
    assert store.list_namespaces(limit=2, offset=1) == [("a", "b", "c", "g"), ("a", "b", "d")]
    store.delete(("a", "e"), "k")
    assert ("a", "e") not in store.list_namespaces()


def test_a_reviewer_approved_item_is_read_but_not_overwritten(store: MemstreamStore,
                                                             stack: Stack, worker: Worker,
                                                             namespace: str,
                                                             tmp_path: Path) -> None:
    """An item a reviewer approved joins the namespace's memory: protected, an update of it
    waits for review, so the store's put raises, naming the pending diff, and the item
    keeps its value."""
    store.put(("shared",), "policy", {"rule": "Deploys freeze on Fridays."})
    reviewer = stack.make_key("--namespace", namespace, "--perm", "read,review")
    with MemoryClient(worker.base_url, key=reviewer, namespace=namespace,
                      env={"HOME": str(tmp_path)}) as review:
        approved = review.review("approve", record_id=store.record_id(("shared",), "policy"))
        assert approved.outcome == "approved"
    with pytest.raises(MemstreamStoreError, match="proposed") as raised:
        store.put(("shared",), "policy", {"rule": "Deploys never freeze."})
    assert raised.value.outcome is not None and raised.value.outcome.outcome == "proposed"
    got = store.get(("shared",), "policy")
    assert got is not None and got.value == {"rule": "Deploys freeze on Fridays."}
    store.delete(("shared",), "policy")
    assert store.get(("shared",), "policy") is None


def test_a_put_memstream_did_not_apply_as_asked_raises(store: MemstreamStore,
                                                       stack: Stack, worker: Worker,
                                                       namespace: str, tmp_path: Path) -> None:
    """A put not decided within its wait raises (pending), and may still apply; a put
    made against a version another writer has moved past is dead-lettered (stale_version)
    and raises, the other writer's value kept."""
    impatient = MemstreamStore(client=store.client, async_client=store.async_client, wait_s=0)
    with pytest.raises(MemstreamStoreError, match="pending") as raised:
        impatient.put(("race",), "k", {"by": "first"})
    assert raised.value.outcome is not None and raised.value.outcome.outcome == "pending"
    until(lambda: store.get(("race",), "k") is not None, "the pending put applied")

    record_id = store.record_id(("race",), "k")
    read_before = store.client.record(record_id)
    with made(stack, worker, namespace, tmp_path) as other:
        other.put(("race",), "k", {"by": "other"})
    stale = MemstreamStore(client=store.client, async_client=store.async_client)
    stale._lineage = lambda _: read_before  # type: ignore[method-assign]
    with pytest.raises(MemstreamStoreError, match="stale_version"):
        stale.put(("race",), "k", {"by": "stale"})
    got = store.get(("race",), "k")
    assert got is not None and got.value == {"by": "other"}


def test_a_batch_reads_before_it_puts_and_ignores_index(store: MemstreamStore) -> None:
    """As InMemoryStore: a batch's reads answer before its puts apply, the last put of an
    item wins; `index` is accepted and ignored."""
    answers = store.batch([PutOp(("b",), "k", {"v": 1}), GetOp(("b",), "k"),
                           PutOp(("b",), "k", {"v": 2}, index=False), SearchOp(("b",))])
    assert answers == [None, None, None, []]
    got = store.get(("b",), "k")
    assert got is not None and got.value == {"v": 2}
    assert store.client.record(store.record_id(("b",), "k")).version == 1
    store.put(("b",), "j", {"v": 3}, index=["v"])
    assert [item.key for item in store.search(("b",))] == ["k", "j"]


async def test_the_async_store_does_the_same(astore: MemstreamStore) -> None:
    namespace = ("users", "bob")
    await astore.aput(namespace, "prefs", {"theme": "dark"})
    await astore.aput(namespace, "memo", {"text": "Bob prefers short answers.", "n": 2})
    got = await astore.aget(namespace, "prefs")
    assert got is not None and got.value == {"theme": "dark"}
    await astore.aput(namespace, "prefs", {"theme": "light"})
    got = await astore.aget(namespace, "prefs")
    assert got is not None and got.value == {"theme": "light"}
    assert [item.key for item in await astore.asearch(("users",))] == ["prefs", "memo"]
    assert [item.key for item in await astore.asearch(("users",), filter={"n": 2})] == ["memo"]
    # An operator on a field an item lacks raises, as InMemoryStore's does.
    with pytest.raises(TypeError):
        await astore.asearch(("users",), filter={"n": {"$gt": 1}})
    assert await astore.alist_namespaces(prefix=("users",)) == [namespace]
    await astore.adelete(namespace, "prefs")
    assert await astore.aget(namespace, "prefs") is None
    await astore.aput(namespace, "prefs", {"theme": "solarized"})
    got = await astore.aget(namespace, "prefs")
    assert got is not None and got.value == {"theme": "solarized"}
    deadline = time.monotonic() + WAIT_S
    while True:
        hits = await astore.asearch(("users",), query="how long should answers to Bob be?")
        if hits and hits[0].score is not None and len(hits) == 2:
            break
        assert time.monotonic() < deadline, hits
        await asyncio.sleep(0.2)
    assert hits[0].key == "memo"
    # The sync and async doors read the same items.
    assert seen(astore.search(("users",))) == seen(await astore.asearch(("users",)))


# The same operations on InMemoryStore and on memstream's: (operation, arguments).
SCRIPT: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("put", (("prefs", "u1"), "theme"), {"value": {"color": "dark", "size": 12}}),
    ("put", (("prefs", "u2"), "theme"), {"value": {"color": "light", "size": 14}}),
    ("put", (("prefs", "u1"), "lang"), {"value": {"code": "en", "tags": ["a", "b"], "size": 10}}),
    ("put", (("notes", "u1", "work"), "n1"), {"value": {"text": "Standup at nine.", "size": 3}}),
    ("get", (("prefs", "u1"), "theme"), {}),
    ("get", (("prefs", "u1"), "missing"), {}),
    ("search", (("prefs",),), {}),
    ("search", (("prefs",),), {"filter": {"size": {"$lt": 13}}}),
    ("search", (("prefs",),), {"filter": {"tags": ["a", "b"]}}),
    ("search", ((),), {"limit": 2, "offset": 1}),
    ("search", (("prefs", "u1"),), {"filter": {"color": "dark", "size": 12}}),
    ("list_namespaces", (), {}),
    ("list_namespaces", (), {"prefix": ("prefs",), "max_depth": 1}),
    ("list_namespaces", (), {"suffix": ("u1",)}),
    ("put", (("prefs", "u1"), "theme"), {"value": {"color": "blue", "size": 12}}),
    ("get", (("prefs", "u1"), "theme"), {}),
    ("search", (("prefs",),), {"filter": {"color": "blue"}}),
    ("delete", (("prefs", "u2"), "theme"), {}),
    ("get", (("prefs", "u2"), "theme"), {}),
    ("search", (("prefs",),), {}),
    ("search", ((),), {"query": "when is the standup?", "limit": 10}),
    ("search", (("prefs",),), {"query": "colour scheme", "filter": {"size": 12}}),
    ("put", (("prefs", "u2"), "theme"), {"value": {"color": "red"}}),
    ("get", (("prefs", "u2"), "theme"), {}),
    ("list_namespaces", (), {"prefix": ("notes",)}),
]


def answer(result: Any, query: bool) -> Any:
    """What the script compares: an item's namespace, key and value (times are each
    store's own, scores memstream's); a ranked search's items as a set (each store ranks
    by its own model), the rest in order."""
    if isinstance(result, Item):
        return (result.namespace, result.key, result.value)
    if isinstance(result, list) and result and isinstance(result[0], Item):
        found = seen(result)
        return sorted(found, key=repr) if query else found
    return result


def test_it_answers_as_langgraphs_in_memory_store(store: MemstreamStore) -> None:
    reference = InMemoryStore()
    for operation, args, kwargs in SCRIPT:
        if operation == "put":
            expected = reference.put(*args, **kwargs)
            got = store.put(*args, **kwargs)
        else:
            expected = getattr(reference, operation)(*args, **kwargs)
            got = getattr(store, operation)(*args, **kwargs)
        query = "query" in kwargs
        assert answer(got, query) == answer(expected, query), (operation, args, kwargs)


class State(TypedDict):
    user: str
    said: str
    remembered: str


def remember(state: State, store: BaseStore) -> dict[str, Any]:
    """A node that writes through the store LangGraph injects."""
    store.put(("users", state["user"], "facts"), "said", {"text": state["said"]})
    return {}


def recall(state: State) -> dict[str, Any]:
    """A later node that reads through the store of the running graph."""
    item = get_store().get(("users", state["user"], "facts"), "said")
    return {"remembered": item.value["text"] if item else ""}


async def arecall(state: State) -> dict[str, Any]:
    item = await get_store().aget(("users", state["user"], "facts"), "said")
    return {"remembered": item.value["text"] if item else ""}


def graph_of(store: BaseStore, reader: Callable[..., Any]) -> Any:
    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("recall", reader)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    return builder.compile(store=store)


def test_a_graph_keeps_what_one_node_writes_for_later_nodes_and_runs(
        store: MemstreamStore) -> None:
    graph = graph_of(store, recall)
    out = graph.invoke({"user": "carol", "said": "Carol is allergic to peanuts.",
                        "remembered": ""})
    assert out["remembered"] == "Carol is allergic to peanuts."
    # A later run of another graph on the same memstream namespace reads it.
    reader = StateGraph(State)
    reader.add_node("recall", recall)
    reader.add_edge(START, "recall")
    later = reader.compile(store=store).invoke({"user": "carol", "said": "", "remembered": ""})
    assert later["remembered"] == "Carol is allergic to peanuts."
    held = store.client.record(store.record_id(("users", "carol", "facts"), "said"))
    assert "Carol is allergic to peanuts." in held.record.text


async def test_an_async_graph_runs_on_abatch(astore: MemstreamStore) -> None:
    graph = graph_of(astore, arecall)
    out = await graph.ainvoke({"user": "dan", "said": "Dan works from Lisbon.",
                               "remembered": ""})
    assert out["remembered"] == "Dan works from Lisbon."


def test_items_alike_are_kept_apart_with_twins_on(twin_stack: Stack,
                                                  twin_worker: Worker,
                                                  tmp_path: Path) -> None:
    """On a worker of the default settings (write-time twins on, MEMSTREAM_TWIN_COSINE
    0.82), an item of the same value as another, and a value restated in other words, are
    each stored as their own item: no put is folded into another item's memory."""
    namespace = "ns-lg-twins"
    with made(twin_stack, twin_worker, namespace, tmp_path) as twins:
        same = {"fact": "The staging database resets every Sunday at 02:00 UTC."}
        twins.put(("ops",), "first", same)
        twins.put(("ops",), "second", same)
        twins.put(("ops",), "third", {"fact": "Every Sunday at 02:00 UTC the staging "
                                              "database is reset."})
        twins.put(("ops",), "first", {"fact": "The staging database resets every Sunday "
                                              "at 02:00 UTC!"})
        assert [(item.key, item.value) for item in twins.search(("ops",))] == [
            ("first", {"fact": "The staging database resets every Sunday at 02:00 UTC!"}),
            ("second", same),
            ("third", {"fact": "Every Sunday at 02:00 UTC the staging database is reset."})]


def test_the_guides_example_runs_as_written(stack: Stack, worker: Worker, namespace: str,
                                            tmp_path: Path) -> None:
    """docs/agents.md's LangGraph example, in a namespace of this test's, configured by the
    environment alone, prints what the guide says it prints."""
    guide = (REPO_ROOT / "docs" / "agents.md").read_text()
    section = guide.split("\n## LangGraph", 1)[1]
    example = re.findall(r"```python\n(.*?)```", section, re.S)[0]
    (printed,) = re.findall(r"It prints:\n\n```\n(.*?)```", section, re.S)
    environment = {name: value for name, value in os.environ.items()
                   if not name.startswith("MEMSTREAM_")}
    environment.update(HOME=str(tmp_path), MEMSTREAM_URL=worker.base_url,
                       MEMSTREAM_API_KEY=stack.operator_key)
    done = subprocess.run([sys.executable, "-c", example.replace('"team-a"', f'"{namespace}"')],
                          cwd=tmp_path, env=environment, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == printed
