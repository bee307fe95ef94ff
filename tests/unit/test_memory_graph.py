"""The memory graph: related ids and wiki-links resolved by id or title, the rest counted."""

from __future__ import annotations

from processors.memory_graph import GraphEdge, GraphNode, GraphRecord, memory_graph


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
