"""The graph views (streams/reads/graph.py reads them): `GET /v1/graph` draws a namespace's
memories and the links between them for the memory browser, with the entities they mention
when asked; `GET /v1/graph/neighbours` walks from a record or an entity along links and shared
entities, a few hops out; `GET /v1/entities` lists the entities, `GET /v1/entities/{key}`
shows one."""

from __future__ import annotations

from typing import Any

from faust.web import Request, Response, View

from processors.api.access import Caller
from processors.api.parameters import BOOLEAN, IDENTIFIER, InvalidValue, Rule, integer, text
from processors.knowledge.entities import entity_key
from processors.knowledge.graph import ENTITY_PREFIX, Reached, is_entity
from stores.entities import Entities, EntitySummary
from stores.records import Records
from streams.api.auth import granted_namespace, personal_reader
from streams.api.pages import Pages
from streams.api.params import AS_OF, READER_PARAMS, Param, Params, optional, required, value
from streams.plumbing.json_values import jsonable
from streams.reads.graph import (
    MAX_DEPTH,
    Neighbourhood,
    SharedEntities,
    drawn_graph,
    entity_page,
    neighbourhood,
)

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
    @pages.page("/v1/graph", params=GRAPH_PARAMS)
    async def graph_view(web: View, request: Request, caller: Caller) -> Response:
        """The memories drawn (with `as_of`, those in force then, as they stood) and their
        links; with `entities`, the entities two or more of them mention, and which."""
        query = request.query
        namespace = granted_namespace(caller, query)
        as_of = optional(query, "as_of", AS_OF)
        drawn = await drawn_graph(records, entities, namespace,
                                  personal_reader(caller, query),
                                  value(query, "limit", LIMIT, GRAPH_LIMIT), as_of,
                                  value(query, "entities", BOOLEAN, False))
        answer = {"namespace": namespace, "truncated": drawn.truncated,
                  "as_of": None if as_of is None else as_of.isoformat(),
                  **jsonable(drawn.graph)}
        if drawn.shared is not None:
            answer |= shared_view(drawn.shared)
        return web.json(answer)

    @pages.page("/v1/graph/neighbours", params=NEIGHBOUR_PARAMS)
    async def neighbours_view(web: View, request: Request, caller: Caller) -> Response:
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
        return web.json({"namespace": namespace,
                         "as_of": None if as_of is None else as_of.isoformat(),
                         **neighbourhood_view(found)})

    @pages.page("/v1/entities/{key}", params=ENTITY_PARAMS)
    async def entity_view_page(web: View, request: Request, caller: Caller,
                               key: str) -> Response:
        """An entity: its names, its relations (stated, and co-mentions) with their evidence
        and confidence, and the latest records that mention it."""
        namespace = granted_namespace(caller, request.query)
        page = await entity_page(records, entities, namespace, key,
                                 personal_reader(caller, request.query))
        if page is None:
            return web.json({"error": f"no entity {key!r} in {namespace!r}"}, status=404)
        return web.json({"namespace": namespace, **entity_view(page.entity),
                         "relations": [jsonable(relation) for relation in page.relations],
                         "mentioned_by": [{"record_id": record.record_id,
                                           "kind": record.record_kind, "title": record.title,
                                           "excerpt": record.text[:200]}
                                          for record in page.mentioned_by]})

    @pages.page("/v1/entities", params=ENTITY_LIST_PARAMS)
    async def entities_view(web: View, request: Request, caller: Caller) -> Response:
        """The namespace's entities, the most mentioned first; `prefix` narrows to those
        whose key starts as its key does."""
        query = request.query
        namespace = granted_namespace(caller, query)
        prefix = optional(query, "prefix", ENTITY_NAME)
        listed = await entities.find_entities(
            namespace, personal_reader(caller, query),
            entity_key(prefix) if prefix else None,
            value(query, "limit", integer(1, MAX_ENTITIES_LIMIT), ENTITIES_LIMIT))
        return web.json({"namespace": namespace, "entities": [entity_view(e) for e in listed]})


def shared_view(shared: SharedEntities) -> dict[str, Any]:
    return {"entities": [entity_view(entity) for entity in shared.entities],
            "mentions": [{"source": record_id, "target": f"{ENTITY_PREFIX}{entity.key}",
                          "relation": "mentions"} for record_id, entity in shared.mentions]}


def neighbourhood_view(found: Neighbourhood) -> dict[str, Any]:
    nodes = []
    for node, reached in found.walk.reached.items():
        if is_entity(node):
            summary = found.entities.get(node[len(ENTITY_PREFIX):])
            if summary is not None:
                nodes.append({**reached_view(reached), "type": "entity",
                              **entity_view(summary)})
        elif node in found.records:
            record = found.records[node]
            nodes.append({**reached_view(reached), "type": "record",
                          "record_id": record.record_id, "kind": record.record_kind,
                          "title": record.title, "excerpt": record.text[:200],
                          "memory_type": record.memory_type, "version": record.version})
    kept = {node["id"] for node in nodes}
    return {
        "from": found.start, "depth": found.depth,
        "truncated": found.walk.truncated,
        "nodes": sorted(nodes, key=lambda node: (node["hops"], -node["strength"], node["id"])),
        "edges": [{"source": link.source, "target": link.target, "relation": link.relation}
                  for link in dict.fromkeys(found.walk.links)
                  if link.source in kept and link.target in kept],
    }


def reached_view(reached: Reached) -> dict[str, Any]:
    return {"id": reached.node, "hops": reached.hops, "via": reached.via,
            "relation": reached.relation, "strength": round(reached.strength, 4)}


def entity_view(entity: EntitySummary) -> dict[str, Any]:
    return {"key": entity.key, "name": entity.name, "entity_kind": entity.kind,
            "aliases": list(entity.aliases), "records": entity.records,
            "first_seen": entity.first_seen.isoformat()}
