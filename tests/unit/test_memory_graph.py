"""The memory graph: related ids and wiki-links resolved by id or title, the rest counted."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from processors.knowledge.graph import (
    HOP_DECAY,
    MAX_ENTITY_RECORDS,
    GraphEdge,
    GraphNode,
    GraphRecord,
    Link,
    Reached,
    link_strength,
    memory_graph,
    reached_score,
    step,
)


def memory(record_id: str, title: str | None = None, *, related: tuple[str, ...] = (),
           links: tuple[str, ...] = (), memory_type: str = "fact") -> GraphRecord:
    return GraphRecord(record_id, "memory", title, f"text of {record_id}", memory_type,
                       "approved", related, links)


def edges_of(records: list[GraphRecord]) -> list[tuple[str, str, str]]:
    return [(e.source, e.target, e.relation) for e in memory_graph(records).edges]


def test_nodes_keep_the_order_given_with_what_the_browser_colours_and_labels_them_by() -> None:
    graph = memory_graph([memory("m2", "VPN", memory_type="lesson"), memory("m1")])
    assert graph.nodes == [
        GraphNode("m2", "VPN", "text of m2", "lesson", "memory", "approved"),
        GraphNode("m1", None, "text of m1", "fact", "memory", "approved")]
    assert graph.edges == [] and graph.unresolved_links == 0 and graph.related_outside == 0


def test_a_wiki_link_resolves_by_title_ignoring_case_and_spaces_or_by_record_id() -> None:
    records = [memory("m1", "Staging VPN"),
               memory("m2", links=(" staging vpn ", "m1")),
               memory("m3", links=("STAGING VPN",))]
    # m2 names m1 twice (by title and by id): one edge.
    assert edges_of(records) == [("m2", "m1", "wiki_link"), ("m3", "m1", "wiki_link")]


def test_unresolved_links_and_related_ids_outside_the_graph_are_counted_not_drawn() -> None:
    graph = memory_graph([memory("m1", "Bastion", related=("gone", "m2"),
                                 links=("Nowhere", "Bastion")),
                          memory("m2", links=("Elsewhere",))])
    assert graph.edges == [GraphEdge("m1", "m2", "related")], "no edge to itself either"
    assert graph.unresolved_links == 2
    assert graph.related_outside == 1


def test_a_title_two_memories_share_resolves_to_the_first_given() -> None:
    records = [memory("newer", "Runbook"), memory("older", "runbook"),
               memory("m3", links=("Runbook",))]
    assert edges_of(records) == [("m3", "newer", "wiki_link")]


def test_related_and_wiki_link_between_the_same_two_are_two_edges() -> None:
    records = [memory("m1", "One", related=("m2",), links=("Two",)), memory("m2", "Two")]
    assert edges_of(records) == [("m1", "m2", "related"), ("m1", "m2", "wiki_link")]


def test_an_id_wins_over_a_title_that_spells_it() -> None:
    records = [memory("m1", "m2"), memory("m2", "Other"), memory("m3", links=("m2",))]
    assert edges_of(records) == [("m3", "m2", "wiki_link")]


def test_an_explicit_link_is_strong_and_a_shared_entity_the_less_the_more_share_it() -> None:
    assert link_strength(Link("m1", "m2", "wiki_link")) == 1.0
    assert link_strength(Link("entity:x", "m2", "mentioned_by", records=2)) == 1.0
    assert link_strength(Link("entity:x", "m2", "mentioned_by", records=10)) == \
        pytest.approx(1 / (1 + math.log(9)))
    assert link_strength(Link("entity:x", "m2", "mentioned_by",
                              records=MAX_ENTITY_RECORDS + 1)) == 0.0
    assert link_strength(Link("entity:a", "entity:b", "uses", weight=0.9)) == 0.9


def test_a_step_follows_the_strongest_links_of_each_node_to_what_was_not_reached() -> None:
    reached = {"m1": Reached.start("m1")}
    links = [Link("m1", "m2", "related"), Link("m1", "entity:pay", "mentions"),
             Link("m1", "m3", "wiki_link"), Link("m1", "m1", "related"),
             Link("m9", "m4", "related")]
    found = step(reached, ["m1"], links, 1, fan_out=2)
    # Two links at most, the strongest first (all equal here: by target); none to itself, and
    # m9 is no frontier.
    assert sorted(found) == ["entity:pay", "m2"]
    assert all(way.origin == "m1" and way.hops == 1 for way in found.values())


def test_a_relation_between_entities_is_walked_both_ways_and_strengths_multiply() -> None:
    reached = {"entity:b": Reached("entity:b", 1, "m1", "mentions", 0.5, "m1")}
    found = step(reached, ["entity:b"], [Link("entity:a", "entity:b", "uses", weight=0.8)], 2)
    assert found["entity:a"] == Reached("entity:a", 2, "entity:b", "uses", 0.4, "m1")


@given(hops=st.integers(0, 3), strength=st.floats(0, 1), score=st.floats(0, 2))
def test_a_reached_record_scores_below_the_hit_it_was_reached_from(
        hops: int, strength: float, score: float) -> None:
    way = Reached("m2", hops, "m1", "related", strength, "m1")
    assert reached_score(score, way) <= score
    assert reached_score(score, way) == score * HOP_DECAY ** hops * strength
