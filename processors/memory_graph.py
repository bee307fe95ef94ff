"""The graph of a namespace's memories, as the memory browser draws it: the memories are the
nodes; related ids and resolved wiki-links are the edges.

A wiki-link `[[Target]]` resolves to the memory whose record id is `Target`, or else whose
title is `Target` (ignoring case and surrounding spaces); when several memories share that
title, to the first of them in the order given (the store gives the newest first). A link
that resolves to no memory in the graph is counted, not drawn; so is a related id outside
the graph (superseded, deprecated, another agent's, or past the limit).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Relation = Literal["related", "wiki_link"]


@dataclass(frozen=True)
class GraphRecord:
    """A record as the graph needs it."""

    record_id: str
    record_kind: str
    title: str | None
    # The start of its text: what names an untitled memory.
    excerpt: str
    memory_type: str | None
    review_state: str
    related_ids: tuple[str, ...]
    wiki_links: tuple[str, ...]


@dataclass(frozen=True)
class GraphNode:
    record_id: str
    title: str | None
    excerpt: str
    memory_type: str | None
    kind: str
    review_state: str


@dataclass(frozen=True)
class GraphEdge:
    source: str
    target: str
    relation: Relation


@dataclass(frozen=True)
class MemoryGraph:
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    # Wiki-links that name no memory of the graph.
    unresolved_links: int
    # Related ids that name no memory of the graph.
    related_outside: int


def _title_key(title: str) -> str:
    return title.strip().casefold()


def memory_graph(records: Sequence[GraphRecord]) -> MemoryGraph:
    """Nodes in the order given; edges once per (source, target, relation), never from a
    node to itself, related ids before wiki-links for each source."""
    by_id = {record.record_id: record for record in records}
    by_title: dict[str, str] = {}
    for record in records:
        if record.title:
            by_title.setdefault(_title_key(record.title), record.record_id)
    edges: dict[tuple[str, str, Relation], None] = {}
    unresolved = outside = 0
    for record in records:
        for related in record.related_ids:
            if related not in by_id:
                outside += 1
            elif related != record.record_id:
                edges[(record.record_id, related, "related")] = None
        for link in record.wiki_links:
            target = link.strip() if link.strip() in by_id else by_title.get(_title_key(link))
            if target is None:
                unresolved += 1
            elif target != record.record_id:
                edges[(record.record_id, target, "wiki_link")] = None
    return MemoryGraph(
        nodes=[GraphNode(r.record_id, r.title, r.excerpt, r.memory_type, r.record_kind,
                         r.review_state)
               for r in records],
        edges=[GraphEdge(source, target, relation) for source, target, relation in edges],
        unresolved_links=unresolved,
        related_outside=outside,
    )
