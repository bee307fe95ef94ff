"""The graph views (streams/reads/graph.py reads them): `GET /v1/graph` draws a namespace's
memories and the links between them for the memory browser, with the entities they mention
when asked; `GET /v1/graph/neighbours` walks from a record or an entity along links and shared
entities, a few hops out; `GET /v1/entities` lists the entities, `GET /v1/entities/{key}`
shows one."""

from __future__ import annotations

from datetime import datetime

from faust.web import Request, Response, View

from memstream_client.answers.graph import (
    Entity,
    EntityList,
    EntityPage,
    EntityRecord,
    EntityRelation,
    GraphEdge,
    GraphNode,
    MemoryGraph,
    Neighbour,
    Neighbourhood,
)
from processors.api.access import Caller
from processors.api.parameters import BOOLEAN, IDENTIFIER, InvalidValue, Rule, integer, text
from processors.knowledge.entities import entity_key
from processors.knowledge.graph import ENTITY_PREFIX, Reached, is_entity
from stores import entities as entity_store
from stores.entities import Entities, EntitySummary
from stores.records import FoundRecord, Records
from streams.api.auth import granted_namespace, personal_reader
from streams.api.pages import Pages
from streams.api.params import AS_OF, READER_PARAMS, Param, Params, optional, required, value
from streams.reads import graph
from streams.reads.graph import MAX_DEPTH, drawn_graph, entity_page, neighbourhood

# Memories drawn per request, by default and at most: a force layout in a browser stays
# readable and quick up to a few hundred nodes.
GRAPH_LIMIT = 300
MAX_GRAPH_LIMIT = 2000
LIMIT = integer(1, MAX_GRAPH_LIMIT)
GRAPH_PARAMS: Params = {**READER_PARAMS, "limit": Param(LIMIT), "as_of": Param(AS_OF),
                        "entities": Param(BOOLEAN)}
DEPTH = integer(1, MAX_DEPTH)
ENTITIES_LIMIT = 50
MAX_ENTITIES_LIMIT = 500
ENTITY_NAME = text(200)


def _node(raw: str) -> str:
    """A walk's start: a record id, or `entity:` and an entity's name or key."""
    if raw.startswith(ENTITY_PREFIX):
        key = entity_key(raw[len(ENTITY_PREFIX):])
        if not key:
            raise InvalidValue("names no entity: entity: and its name")
        return f"{ENTITY_PREFIX}{key}"
    return IDENTIFIER(raw)


NODE = Rule(_node, {"type": "string", "description": (
    "a record id, or entity: and an entity's name (normalised as entities are)")})
NEIGHBOUR_PARAMS: Params = {**READER_PARAMS, "from": Param(NODE), "depth": Param(DEPTH),
                            "as_of": Param(AS_OF)}
ENTITY_LIST_PARAMS: Params = {**READER_PARAMS, "prefix": Param(ENTITY_NAME),
                              "limit": Param(integer(1, MAX_ENTITIES_LIMIT))}
ENTITY_PARAMS: Params = {**READER_PARAMS, "key": Param(ENTITY_NAME)}


def wire_graph(pages: Pages, records: Records, entities: Entities) -> None:
    @pages.page("/v1/graph", params=GRAPH_PARAMS, answer=MemoryGraph)
    async def graph_view(web: View, request: Request, caller: Caller) -> MemoryGraph:
        """The memories drawn (with `as_of`, those in force then, as they stood) and their
        links; with `entities`, the entities two or more of them mention, and which."""
        query = request.query
        namespace = granted_namespace(caller, query)
        as_of = optional(query, "as_of", AS_OF)
        drawn = await drawn_graph(records, entities, namespace,
                                  personal_reader(caller, query),
                                  value(query, "limit", LIMIT, GRAPH_LIMIT), as_of,
                                  value(query, "entities", BOOLEAN, False))
        answer = MemoryGraph(
            namespace=namespace, truncated=drawn.truncated, as_of=as_of,
            nodes=[GraphNode(record_id=node.record_id, title=node.title, excerpt=node.excerpt,
                             memory_type=node.memory_type, kind=node.kind,
                             review_state=node.review_state) for node in drawn.graph.nodes],
            edges=[GraphEdge(source=edge.source, target=edge.target, relation=edge.relation)
                   for edge in drawn.graph.edges],
            unresolved_links=drawn.graph.unresolved_links,
            related_outside=drawn.graph.related_outside)
        if drawn.shared is None:
            return answer
        # Only when asked: a graph drawn without them says nothing of entities.
        return answer.model_copy(update=shared_answer(drawn.shared))

    @pages.page("/v1/graph/neighbours", params=NEIGHBOUR_PARAMS, answer=Neighbourhood)
    async def neighbours_view(web: View, request: Request,
                              caller: Caller) -> Neighbourhood | Response:
        """The records and entities around a record or an entity, `depth` hops out (1 by
        default); with `as_of`, the records in force then, as they stood."""
        query = request.query
        namespace = granted_namespace(caller, query)
        start = required(query, "from", NODE)
        as_of = optional(query, "as_of", AS_OF)
        found = await neighbourhood(records, entities, namespace, start,
                                    value(query, "depth", DEPTH, 1),
                                    personal_reader(caller, query), as_of)
        if found is None:
            what = f"entity {start[len(ENTITY_PREFIX):]!r}" if is_entity(start) \
                else f"record {start!r}"
            return web.json({"error": f"no {what} in {namespace!r}"}, status=404)
        return neighbourhood_answer(namespace, as_of, found)

    @pages.page("/v1/entities/{key}", params=ENTITY_PARAMS, answer=EntityPage)
    async def entity_view_page(web: View, request: Request, caller: Caller,
                               key: str) -> EntityPage | Response:
        """An entity: its names, its relations (stated, and co-mentions) with their evidence
        and confidence, and the latest records that mention it."""
        namespace = granted_namespace(caller, request.query)
        page = await entity_page(records, entities, namespace, key,
                                 personal_reader(caller, request.query))
        if page is None:
            return web.json({"error": f"no entity {key!r} in {namespace!r}"}, status=404)
        entity = page.entity
        return EntityPage(
            namespace=namespace, key=entity.key, name=entity.name, entity_kind=entity.kind,
            aliases=list(entity.aliases), records=entity.records,
            first_seen=entity.first_seen,
            relations=[relation_answer(relation) for relation in page.relations],
            mentioned_by=[EntityRecord(record_id=record.record_id, kind=record.record_kind,
                                       title=record.title, excerpt=excerpt(record))
                          for record in page.mentioned_by])

    @pages.page("/v1/entities", params=ENTITY_LIST_PARAMS, answer=EntityList)
    async def entities_view(web: View, request: Request, caller: Caller) -> EntityList:
        """The namespace's entities, the most mentioned first; `prefix` narrows to those
        whose key starts as its key does."""
        query = request.query
        namespace = granted_namespace(caller, query)
        prefix = optional(query, "prefix", ENTITY_NAME)
        listed = await entities.find_entities(
            namespace, personal_reader(caller, query),
            entity_key(prefix) if prefix else None,
            value(query, "limit", integer(1, MAX_ENTITIES_LIMIT), ENTITIES_LIMIT))
        return EntityList(namespace=namespace, entities=[entity_answer(e) for e in listed])


def shared_answer(shared: graph.SharedEntities) -> dict[str, object]:
    """The entities two or more drawn memories mention, and each mention, as MemoryGraph's
    `entities` and `mentions`."""
    return {"entities": [entity_answer(entity) for entity in shared.entities],
            "mentions": [GraphEdge(source=record_id, target=f"{ENTITY_PREFIX}{entity.key}",
                                   relation="mentions")
                         for record_id, entity in shared.mentions]}


def neighbourhood_answer(namespace: str, as_of: datetime | None,
                         found: graph.Neighbourhood) -> Neighbourhood:
    nodes: list[Neighbour] = []
    for node, reached in found.walk.reached.items():
        if is_entity(node):
            summary = found.entities.get(node[len(ENTITY_PREFIX):])
            if summary is not None:
                nodes.append(entity_neighbour(reached, summary))
        elif node in found.records:
            nodes.append(record_neighbour(reached, found.records[node]))
    kept = {node.id for node in nodes}
    return Neighbourhood.model_validate({
        "namespace": namespace, "as_of": as_of,
        "from": found.start, "depth": found.depth,
        "truncated": found.walk.truncated,
        "nodes": sorted(nodes, key=lambda node: (node.hops, -node.strength, node.id)),
        "edges": [GraphEdge(source=link.source, target=link.target, relation=link.relation)
                  for link in dict.fromkeys(found.walk.links)
                  if link.source in kept and link.target in kept],
    })


def record_neighbour(reached: Reached, record: FoundRecord) -> Neighbour:
    return Neighbour(id=reached.node, hops=reached.hops, via=reached.via,
                     relation=reached.relation, strength=round(reached.strength, 4),
                     type="record", record_id=record.record_id, kind=record.record_kind,
                     title=record.title, excerpt=excerpt(record),
                     memory_type=record.memory_type, version=record.version)


def entity_neighbour(reached: Reached, entity: EntitySummary) -> Neighbour:
    return Neighbour(id=reached.node, hops=reached.hops, via=reached.via,
                     relation=reached.relation, strength=round(reached.strength, 4),
                     type="entity", key=entity.key, name=entity.name,
                     entity_kind=entity.kind, aliases=list(entity.aliases),
                     records=entity.records, first_seen=entity.first_seen)


def entity_answer(entity: EntitySummary) -> Entity:
    return Entity(key=entity.key, name=entity.name, entity_kind=entity.kind,
                  aliases=list(entity.aliases), records=entity.records,
                  first_seen=entity.first_seen)


def relation_answer(relation: entity_store.EntityRelation) -> EntityRelation:
    return EntityRelation(source=relation.source, target=relation.target,
                          relation=relation.relation, origin=relation.origin,
                          confidence=relation.confidence, records=relation.records,
                          evidence=list(relation.evidence))


def excerpt(record: FoundRecord) -> str:
    """What a list shows of a record's text: its start."""
    return record.text[:200]
