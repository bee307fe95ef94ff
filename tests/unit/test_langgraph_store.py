"""The LangGraph store's mapping (client/agents/langgraph_store.py), none of it I/O: an item's
record id, repo, tags and text; the text read back as the item put; a filter and
list_namespaces judged as LangGraph's InMemoryStore judges them; a search's order; TTL
refused before anything is sent."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from langgraph.store.base import GetOp, Item, ListNamespacesOp, MatchCondition, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore, _compare_values

from memstream_client.agents.langgraph_store import (
    MAX_PREFIX_TAGS,
    MAX_TEXT,
    MemstreamStore,
    Stored,
    event_id_of,
    in_order,
    matches,
    namespaces_listed,
    parsed,
    path_of,
    prefix_tag,
    read_ops,
    record_id_of,
    repo_of,
    search_answer,
    tags_of,
    text_of,
)
from memstream_client.events import Repo
from memstream_client.ids import memory_record_id
from memstream_client.sdk import AsyncMemoryClient, MemoryClient

VALUES: list[dict[str, Any]] = [
    {},
    {"theme": "dark", "size": 12, "ratio": 0.5, "on": True, "off": None},
    {"name": "Zoë Ångström", "city": "東京", "emoji": "🚀"},
    {"text": "one\ntwo\t\"three\" \\ four", "nul": "a\x00b", "lone": "\ud800 x"},
    {"nested": {"list": [1, [2, {"three": 3}]], "empty": []}},
]


@pytest.mark.parametrize("value", VALUES)
def test_the_text_reads_back_as_the_item_put(value: dict[str, Any]) -> None:
    text = text_of(("users", "alice"), "prefs", value)
    head, _ = text.split("\n")  # the JSON on one line
    assert head == "LangGraph store item users/alice/prefs:"
    assert "\x00" not in text
    found = parsed(text)
    assert found is not None and (found.namespace, found.key, found.value) == (
        ("users", "alice"), "prefs", value)


def test_a_value_that_no_memory_text_can_hold_is_refused_before_it_is_sent() -> None:
    with pytest.raises(ValueError, match="is not JSON"):
        text_of(("a",), "k", {"when": datetime.now(UTC)})
    with pytest.raises(ValueError, match="is not JSON"):
        text_of(("a",), "k", {"nan": float("nan")})
    with pytest.raises(ValueError, match="a JSON object"):
        text_of(("a",), "k", ["not", "an", "object"])  # type: ignore[arg-type]
    fits = MAX_TEXT - len(text_of(("a",), "k", {"t": ""}))
    assert len(text_of(("a",), "k", {"t": "x" * fits})) == MAX_TEXT
    with pytest.raises(ValueError, match=f"more than the {MAX_TEXT}"):
        text_of(("a",), "k", {"t": "x" * (fits + 1)})


def test_a_text_this_store_did_not_write_is_no_item() -> None:
    assert parsed("Deploys to staging need the VPN.") is None
    assert parsed("a line\n[1, 2]") is None
    assert parsed('a line\n{"namespace": ["a"], "key": 1, "value": {}}') is None


def test_an_item_is_named_by_its_memstream_namespace_its_namespace_and_its_key() -> None:
    event_id = event_id_of("team-a", ("a", "b"), "c")
    assert event_id == event_id_of("team-a", ("a", "b"), "c") and len(event_id) <= 200
    assert record_id_of("team-a", ("a", "b"), "c") == memory_record_id("team-a", event_id)
    others = {event_id_of("team-b", ("a", "b"), "c"), event_id_of("team-a", ("a",), "b/c"),
              event_id_of("team-a", ("a", "b", "c"), ""), event_id_of("team-a", ("a/b",), "c"),
              event_id_of("team-a", ("a", "bc"), ""), event_id_of("team-a", ("ab",), "c")}
    assert event_id not in others and len(others) == 6
    assert repo_of(("a", "b"), "c") != repo_of(("a",), "b/c")
    # A repo the write's schema accepts.
    assert re.fullmatch(Repo.__metadata__[0].pattern, repo_of(("a", "b"), "c"))


def test_tags_name_every_prefix_up_to_twenty_tags() -> None:
    assert tags_of(("a", "b")) == ["langgraph", prefix_tag(("a",)), prefix_tag(("a", "b"))]
    assert prefix_tag(()) == "langgraph"
    deep = tuple(str(depth) for depth in range(30))
    tags = tags_of(deep)
    assert len(tags) == 1 + MAX_PREFIX_TAGS == 20 and all(1 <= len(tag) <= 64 for tag in tags)
    # A prefix deeper than the tags go is narrowed by its 19th label (and filtered after).
    assert prefix_tag(deep) == prefix_tag(deep[:MAX_PREFIX_TAGS]) == tags[-1]


def test_a_path_for_people_holds_nothing_a_stored_field_refuses() -> None:
    assert path_of(("a", "b"), "c") == "a/b/c"
    assert path_of(("a",), "x\ny\x00z\ud800") == "a/x y z"


CONDITIONS: list[Any] = [
    "dark", 12, 12.0, None, True, ["a", "b"], ["b", "a"], {"x": 1}, {"x": {"$gt": 0}},
    {"$eq": 12}, {"$ne": 12}, {"$gt": 11}, {"$gte": 12}, {"$lt": 12}, {"$lte": 12.5},
    {"$gt": 1, "$lt": 20}, {},
]
ITEM_VALUES: list[Any] = ["dark", 12, 13.5, None, True, ["a", "b"], {"x": 1}, {"x": 2, "y": 3},
                          {"x": -1}, "light"]


@pytest.mark.parametrize("condition", CONDITIONS)
def test_a_filter_is_judged_as_in_memory_store_judges_it(condition: Any) -> None:
    for value in ITEM_VALUES:
        try:
            expected: bool | type[Exception] = _compare_values(value, condition)
        except (TypeError, ValueError) as exc:
            expected = type(exc)
        if isinstance(expected, bool):
            assert matches(value, condition) is expected, (value, condition)
        else:
            with pytest.raises(expected):
                matches(value, condition)
    with pytest.raises(ValueError, match="Unsupported operator"):
        matches(1, {"$in": [1]})


NAMESPACES = [("a", "b", "c"), ("a", "b", "d"), ("a", "e"), ("f", "b", "c"),
              ("a", "b", "c", "g"), ("x",)]
LISTINGS = [
    ListNamespacesOp(),
    ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("a", "b")),)),
    ListNamespacesOp(match_conditions=(MatchCondition("suffix", ("b", "c")),)),
    ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("*", "b")),
                                       MatchCondition("suffix", ("c",)))),
    ListNamespacesOp(match_conditions=(MatchCondition("suffix", ("*", "*", "*", "*", "*")),)),
    ListNamespacesOp(max_depth=1),
    ListNamespacesOp(max_depth=2, limit=2, offset=1),
    ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("a",)),), max_depth=3),
    ListNamespacesOp(limit=0),
]


@pytest.mark.parametrize("op", LISTINGS)
def test_namespaces_are_listed_as_in_memory_store_lists_them(op: ListNamespacesOp) -> None:
    reference = InMemoryStore()
    for namespace in NAMESPACES:
        reference.put(namespace, "k", {"v": 1})
    assert namespaces_listed(NAMESPACES, op) == reference.batch([op])[0]


def stored(namespace: tuple[str, ...], key: str, minute: int, **value: Any) -> Stored:
    at = datetime(2026, 11, 28, 12, 0, tzinfo=UTC) + timedelta(minutes=minute)
    return Stored(Item(value=value, key=key, namespace=namespace, created_at=at,
                       updated_at=at), f"mem_{key}")


def test_items_come_in_the_order_put_namespace_by_namespace() -> None:
    items = [stored(("b",), "b2", 4), stored(("a",), "a1", 1), stored(("b",), "b1", 2),
             stored(("a",), "a2", 3)]
    assert [s.item.key for s in in_order(items)] == ["a1", "a2", "b1", "b2"]


def test_a_query_ranks_the_scored_first_and_serves_the_rest_after_unscored() -> None:
    items = in_order([stored(("a",), "one", 1, kind="x"), stored(("a",), "two", 2, kind="y"),
                      stored(("a",), "three", 3, kind="x"), stored(("b",), "four", 4, kind="x")])
    scores = {"mem_three": 0.9, "mem_one": 0.4, "mem_four": 0.99}
    found = search_answer(SearchOp(("a",), query="q", limit=10), items, scores)
    assert [(item.key, item.score) for item in found] == [
        ("three", 0.9), ("one", 0.4), ("two", None)]
    found = search_answer(SearchOp(("a",), {"kind": "x"}, limit=1, offset=1, query="q"),
                          items, scores)
    assert [item.key for item in found] == ["one"]
    found = search_answer(SearchOp((), limit=3), items, None)
    assert [(item.key, item.score) for item in found] == [
        ("one", None), ("two", None), ("three", None)]


def test_a_batch_reads_first_then_applies_each_items_last_put() -> None:
    ops = [PutOp(("a",), "k", {"v": 1}), GetOp(("a",), "k"), PutOp(("a",), "k", {"v": 2}),
           PutOp(("a",), "j", None)]
    listed, puts = read_ops(ops)
    assert listed == ops
    assert list(puts.values()) == [ops[2], ops[3]]
    with pytest.raises(ValueError, match="Unknown operation"):
        read_ops(["get"])  # type: ignore[list-item]


def test_ttl_is_refused_before_anything_is_sent() -> None:
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(500)

    store = MemstreamStore(
        client=MemoryClient("http://memstream.test", key="k", namespace="team-a", env={},
                            transport=httpx.MockTransport(answer)),
        async_client=AsyncMemoryClient("http://memstream.test", key="k", namespace="team-a",
                                       env={}, transport=httpx.MockTransport(answer)))
    assert store.namespace == "team-a" and not store.supports_ttl
    with pytest.raises(NotImplementedError, match="TTL is not supported"):
        store.put(("a",), "k", {"v": 1}, ttl=5.0)
    assert sent == []


def test_a_store_is_one_memstream_namespace() -> None:
    with pytest.raises(ValueError, match="one memstream namespace"):
        MemstreamStore("http://memstream.test", key="k", env={})
