"""The graph of a namespace's memories, its entities and a walk's neighbourhood."""

from __future__ import annotations

from pydantic import Field

from memstream_client.answers.base import Answer, Instant


class GraphNode(Answer):
    record_id: str
    title: str | None
    excerpt: str
    memory_type: str | None
    kind: str
    review_state: str


class GraphEdge(Answer):
    source: str
    target: str
    # `related` or `wiki_link`.
    relation: str


class MemoryGraph(Answer):
    namespace: str
    truncated: bool
    # The moment asked: the memories in force then, as they stood; None: now.
    as_of: Instant | None
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    unresolved_links: int
    related_outside: int
    # Asked with entities=true: those two or more of the nodes mention, and the mentions.
    entities: list[Entity] = Field(default_factory=list)
    mentions: list[GraphEdge] = Field(default_factory=list)


class Entity(Answer):
    """A name records mention, normalised (`key`), as first written (`name`), with the other
    forms it was written in and how many live records mention it."""

    key: str
    name: str
    entity_kind: str
    aliases: list[str]
    records: int
    first_seen: Instant


class EntityList(Answer):
    namespace: str
    entities: list[Entity]


class EntityRelation(Answer):
    """A relation of an entity: stated in a sentence or a page's wiki-link (`origin`
    pattern, wiki_link, llm), or read from the records that name both (`co_mention`); with
    how many records show it, up to five of them, and a confidence."""

    source: str
    target: str
    relation: str
    origin: str
    confidence: float
    records: int
    evidence: list[str]


class EntityRecord(Answer):
    record_id: str
    kind: str
    title: str | None
    excerpt: str


class EntityPage(Entity):
    """An entity with its relations and the latest records that mention it."""

    namespace: str
    relations: list[EntityRelation]
    mentioned_by: list[EntityRecord]


class Neighbour(Answer):
    """A record or an entity a walk reached: `hops` between records from the start, `via` the
    node it came from by `relation`, `strength` the product of its links' strengths. A
    record (`type` record) has a record's fields, an entity (`type` entity) an entity's;
    neither has the other's."""

    id: str
    hops: int
    via: str | None
    relation: str | None
    strength: float
    # record or entity.
    type: str
    # A record's.
    record_id: str | None = None
    kind: str | None = None
    title: str | None = None
    # The start of its text.
    excerpt: str | None = None
    memory_type: str | None = None
    version: int | None = None
    # An entity's (as Entity shows it).
    key: str | None = None
    name: str | None = None
    entity_kind: str | None = None
    aliases: list[str] = Field(default_factory=list)
    records: int | None = None
    first_seen: Instant | None = None


class Neighbourhood(Answer):
    namespace: str
    # The moment asked: the records in force then, as they stood; None: now.
    as_of: Instant | None
    from_: str = Field(alias="from")
    depth: int
    truncated: bool
    nodes: list[Neighbour]
    edges: list[GraphEdge]
