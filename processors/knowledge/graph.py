"""The graph of a namespace's memories, as the memory browser draws it: the memories are the
nodes; related ids and resolved wiki-links are the edges.

A wiki-link `[[Target]]` resolves to the memory whose record id is `Target`, or else whose
title is `Target` (ignoring case and surrounding spaces); when several memories share that
title, to the first of them in the order given (the store gives the newest first). A link
that resolves to no memory in the graph is counted, not drawn; so is a related id outside
the graph (superseded, deprecated, another agent's, or past the limit).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
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


# ---------------------------------------------------------------------------- neighbours

# A walk's nodes are records (by record id) and entities (by this prefix and their key).
ENTITY_PREFIX = "entity:"
# An entity that more records mention than this links none of them: a speaker of every turn
# or the product a namespace is about is no sign that two records belong together.
MAX_ENTITY_RECORDS = 50
# Links each node of a walk follows, the strongest first; nodes a walk reaches, at most.
FAN_OUT = 12
MAX_REACHED = 200
# Record-to-record links that someone wrote: a related id, a wiki-link.
EXPLICIT = frozenset({"related", "wiki_link"})


@dataclass(frozen=True)
class Link:
    """A link a walk may follow. `weight`: how much it says (1 for what someone wrote, a
    relation's confidence); `records`: how many records back it (for `mentioned_by`, how many
    mention the entity)."""

    source: str
    target: str
    relation: str
    weight: float = 1.0
    records: int = 1


@dataclass(frozen=True)
class Reached:
    """A node a walk reached: after `hops` links between records, from `via` by
    `relation`, with the product of the strengths of the links on its way from `origin`
    (the start it was reached from)."""

    node: str
    hops: int
    via: str | None
    relation: str | None
    strength: float
    origin: str

    @classmethod
    def start(cls, node: str) -> Reached:
        return cls(node, 0, None, None, 1.0, node)


def entity_node(key: str) -> str:
    return f"{ENTITY_PREFIX}{key}"


def is_entity(node: str) -> bool:
    return node.startswith(ENTITY_PREFIX)


def link_strength(link: Link) -> float:
    """How strongly a link ties what it joins: an explicit link fully; a shared entity the
    less the more records share it (1 for two records, 0.3 for ten), and not at all past
    MAX_ENTITY_RECORDS; a relation between entities by its confidence."""
    if link.relation == "mentioned_by":
        if link.records > MAX_ENTITY_RECORDS:
            return 0.0
        return 1.0 / (1.0 + math.log(max(link.records - 1, 1)))
    if link.relation in EXPLICIT or link.relation == "mentions":
        return 1.0
    return min(max(link.weight, 0.0), 1.0)


def step(reached: Mapping[str, Reached], frontier: Sequence[str], links: Sequence[Link],
         hops: int, fan_out: int = FAN_OUT) -> dict[str, Reached]:
    """The nodes `links` reach from `frontier` that were not reached before: each frontier
    node follows its `fan_out` strongest links (ties by target); a node reached two ways
    keeps its strongest way."""
    outgoing: dict[str, list[tuple[float, str, str]]] = {node: [] for node in frontier}
    for link in links:
        strength = link_strength(link)
        if strength <= 0.0:
            continue
        # A relation between entities holds both ways for a walk ("A uses B": from B, A is
        # a neighbour); the store gives record links both ways already.
        ends = [(link.source, link.target)]
        if is_entity(link.source) and is_entity(link.target):
            ends.append((link.target, link.source))
        for start, end in ends:
            if start in outgoing and end not in reached:
                outgoing[start].append((strength, end, link.relation))
    found: dict[str, Reached] = {}
    for node in frontier:
        base = reached[node]
        for strength, end, relation in sorted(outgoing[node], key=lambda o: (-o[0], o[1]))[
                :fan_out]:
            candidate = Reached(end, hops, node, relation, base.strength * strength,
                                base.origin)
            if end not in found or candidate.strength > found[end].strength:
                found[end] = candidate
    return found


# A record a recall reaches from one of its hits scores the hit's score times this per hop,
# times the strength of the links it was reached by: below the hit, and the further the
# lower. Measured on LoCoMo and agent-shaped memories (docs/retrieval.md#links).
HOP_DECAY = 0.5
# The best hits a recall expands from.
EXPANDED_FROM = 3


def reached_score(origin_score: float, reached: Reached) -> float:
    """The score of a record a recall reached from a hit scoring `origin_score`."""
    return origin_score * HOP_DECAY ** reached.hops * reached.strength
