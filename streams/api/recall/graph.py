"""The graph of a namespace's memories: `GET /v1/graph` draws its memories and the links between
them for the memory browser (processors/knowledge/graph.py says how links resolve), with the
entities they mention when asked; `GET /v1/graph/neighbours` walks from a record or an entity
along links and shared entities, a few hops out; `GET /v1/entities` lists the entities.

A walk counts hops between records: a related id or a wiki-link is one, and so is an entity
two records share (record, entity, record). Each hop reads the links around its frontier in
two queries (stores/entities.py) and keeps each node's strongest links
(processors/knowledge/graph.py `step`), so a walk of three hops costs six small queries however
large the namespace.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from faust.web import Request, Response, View

from processors.api.access import Caller
from processors.api.parameters import BOOLEAN, IDENTIFIER, InvalidValue, Rule, integer, text
from processors.knowledge.entities import entity_key
from processors.knowledge.graph import (
    ENTITY_PREFIX,
    FAN_OUT,
    MAX_REACHED,
    Link,
    Reached,
    is_entity,
    memory_graph,
    step,
)
from stores.entities import Entities, EntitySummary
from stores.record_versions import PersonalReader
from stores.records import FoundRecord, Records
from streams.api.auth import granted_namespace, personal_reader
from streams.api.pages import Pages
from streams.api.params import AS_OF, READER_PARAMS, Param, Params, optional, required, value
from streams.plumbing.json_values import jsonable

# Memories drawn per request, by default and at most: a force layout in a browser stays
# readable and quick up to a few hundred nodes.
GRAPH_LIMIT = 300
MAX_GRAPH_LIMIT = 2000
LIMIT = integer(1, MAX_GRAPH_LIMIT)
GRAPH_PARAMS: Params = {**READER_PARAMS, "limit": Param(LIMIT), "as_of": Param(AS_OF),
                        "entities": Param(BOOLEAN)}
MAX_DEPTH = 3
DEPTH = integer(1, MAX_DEPTH)
# Records of an entity a walk follows: the latest that mention it.
PER_ENTITY = 20
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
# Relations and records an entity's page shows, each.
ENTITY_SHOWN = 20


@dataclass(frozen=True)
class Walk:
    """What a walk reached, by node, and the links it followed to get there."""

    reached: dict[str, Reached]
    links: list[Link]
    truncated: bool


async def walk(entities: Entities, namespace: str, starts: Sequence[str], depth: int,
               reader: PersonalReader, as_of: datetime | None = None, fan_out: int = FAN_OUT,
               max_reached: int = MAX_REACHED) -> Walk:
    """The nodes within `depth` record hops of `starts` (processors/knowledge/graph.py), among
    the records in force now, or at `as_of`."""
    reached = {node: Reached.start(node) for node in starts}
    followed: list[Link] = []
    frontier = list(starts)
    truncated = False
    for hops in range(1, depth + 1):
        records = [node for node in frontier if not is_entity(node)]
        links = await entities.record_links(namespace, records, reader, as_of) \
            if records else []
        found = step(reached, records, links, hops, fan_out)
        # The entities the frontier mentions are crossed on this same hop, to the records
        # that mention them too; so are the entities the frontier holds (a start, a
        # relation's other end).
        crossed = [node for node in [*found, *frontier] if is_entity(node)]
        reached.update(found)
        entity_links = await entities.entity_links(
            namespace, [node[len(ENTITY_PREFIX):] for node in crossed], reader, PER_ENTITY,
            as_of) if crossed else []
        beyond = step(reached, crossed, entity_links, hops, fan_out)
        reached.update(beyond)
        followed += [link for link in [*links, *entity_links]
                     if link.target in reached and link.source in reached]
        frontier = [node for node in [*found, *beyond]
                    if not is_entity(node) or reached[node].relation != "mentions"]
        if len(reached) > max_reached:
            truncated = True
            break
    return Walk(reached, followed, truncated)


def wire_graph(pages: Pages, records: Records, entities: Entities) -> None:
    @pages.page("/v1/graph", params=GRAPH_PARAMS)
    async def graph_view(web: View, request: Request, caller: Caller) -> Response:
        """The memories drawn (with `as_of`, those in force then, as they stood) and their
        links; with `entities`, the entities two or more of them mention, and which."""
        query = request.query
        namespace = granted_namespace(caller, query)
        limit = value(query, "limit", LIMIT, GRAPH_LIMIT)
        as_of = optional(query, "as_of", AS_OF)
        # One more than asked tells whether the graph was cut.
        found = await records.graph_records(namespace, personal_reader(caller, query),
                                            limit + 1, as_of)
        graph = memory_graph(found[:limit])
        answer = {"namespace": namespace, "truncated": len(found) > limit,
                  "as_of": None if as_of is None else as_of.isoformat(), **jsonable(graph)}
        if value(query, "entities", BOOLEAN, False):
            answer |= await shared_entities(entities, namespace,
                                            [node.record_id for node in graph.nodes])
        return web.json(answer)

    @pages.page("/v1/graph/neighbours", params=NEIGHBOUR_PARAMS)
    async def neighbours_view(web: View, request: Request, caller: Caller) -> Response:
        """The records and entities around a record or an entity, `depth` hops out (1 by
        default); with `as_of`, the records in force then, as they stood."""
        query = request.query
        namespace = granted_namespace(caller, query)
        start = required(query, "from", NODE)
        depth = value(query, "depth", DEPTH, 1)
        as_of = optional(query, "as_of", AS_OF)
        reader = personal_reader(caller, query)
        if is_entity(start):
            key = start[len(ENTITY_PREFIX):]
            known = await entities.entities(namespace, [key], reader, as_of)
            # An entity only records the reader may not see mention is none of its business.
            if key not in known or known[key].records == 0:
                return web.json({"error": f"no entity {key!r} in {namespace!r}"}, status=404)
        elif not await readable(records, namespace, [start], reader, as_of):
            return web.json({"error": f"no record {start!r} in {namespace!r}"}, status=404)
        found = await walk(entities, namespace, [start], depth, reader, as_of)
        return web.json(await neighbourhood_view(records, entities, namespace, start, depth,
                                                 found, reader, as_of))

    @pages.page("/v1/entities/{key}", params=ENTITY_PARAMS)
    async def entity_view_page(web: View, request: Request, caller: Caller,
                               key: str) -> Response:
        """An entity: its names, its relations (stated, and co-mentions) with their evidence
        and confidence, and the latest records that mention it."""
        namespace = granted_namespace(caller, request.query)
        shown = await entity_page(records, entities, namespace, key,
                                  personal_reader(caller, request.query))
        if shown is None:
            return web.json({"error": f"no entity {key!r} in {namespace!r}"}, status=404)
        return web.json(shown)

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


async def entity_page(records: Records, entities: Entities, namespace: str, name: str,
                      reader: PersonalReader) -> dict[str, Any] | None:
    """An entity (by its name or key), its relations with their evidence and confidence, and
    the latest records that mention it; None when no record the reader may see does."""
    key = entity_key(name)
    found = (await entities.entities(namespace, [key], reader)).get(key) if key else None
    if found is None or found.records == 0:
        return None
    relations = await entities.relations_of(namespace, key, reader, ENTITY_SHOWN)
    mentioned = [link.target for link in await entities.entity_links(
        namespace, [key], reader, ENTITY_SHOWN) if link.relation == "mentioned_by"]
    shown = await readable(records, namespace, mentioned, reader, None)
    return {"namespace": namespace, **entity_view(found),
            "relations": [jsonable(relation) for relation in relations],
            "mentioned_by": [{"record_id": record.record_id, "kind": record.record_kind,
                              "title": record.title, "excerpt": record.text[:200]}
                             for record_id in mentioned if (record := shown.get(record_id))]}


async def shared_entities(entities: Entities, namespace: str,
                          record_ids: Sequence[str]) -> dict[str, Any]:
    """The entities two or more of these records mention (one only a record mentions links
    nothing in a picture), and their mentions."""
    mentioned = [(record_id, entity) for record_id, entity in
                 await entities.mentioned_in(namespace, record_ids) if entity.records > 1]
    shown = {entity.key: entity for _, entity in mentioned}
    return {"entities": [entity_view(entity) for entity in shown.values()],
            "mentions": [{"source": record_id, "target": f"{ENTITY_PREFIX}{entity.key}",
                          "relation": "mentions"} for record_id, entity in mentioned]}


async def readable(records: Records, namespace: str, record_ids: Sequence[str],
                   reader: PersonalReader, as_of: datetime | None) -> dict[str, FoundRecord]:
    """Those of these records the reader may see: in force now, or at `as_of`."""
    found = await (records.records_by_id(namespace, record_ids) if as_of is None
                   else records.records_as_of(namespace, record_ids, as_of))
    return {record_id: record for record_id, record in found.items()
            if record.scope == "shared" or reader.every_agent
            or record.agent_id == reader.agent_id}


async def neighbourhood_view(records: Records, entities: Entities, namespace: str, start: str,
                             depth: int, found: Walk, reader: PersonalReader,
                             as_of: datetime | None) -> dict[str, Any]:
    record_ids = [node for node in found.reached if not is_entity(node)]
    keys = [node[len(ENTITY_PREFIX):] for node in found.reached if is_entity(node)]
    shown = await readable(records, namespace, record_ids, reader, as_of)
    named = await entities.entities(namespace, keys, reader, as_of) if keys else {}
    nodes = []
    for node, reached in found.reached.items():
        if is_entity(node):
            summary = named.get(node[len(ENTITY_PREFIX):])
            if summary is not None:
                nodes.append({**reached_view(reached), "type": "entity",
                              **entity_view(summary)})
        elif node in shown:
            record = shown[node]
            nodes.append({**reached_view(reached), "type": "record",
                          "record_id": record.record_id, "kind": record.record_kind,
                          "title": record.title, "excerpt": record.text[:200],
                          "memory_type": record.memory_type, "version": record.version})
    kept = {node["id"] for node in nodes}
    return {
        "namespace": namespace, "from": start, "depth": depth,
        "as_of": None if as_of is None else as_of.isoformat(),
        "truncated": found.truncated,
        "nodes": sorted(nodes, key=lambda node: (node["hops"], -node["strength"], node["id"])),
        "edges": [{"source": link.source, "target": link.target, "relation": link.relation}
                  for link in dict.fromkeys(found.links)
                  if link.source in kept and link.target in kept],
    }


def reached_view(reached: Reached) -> dict[str, Any]:
    return {"id": reached.node, "hops": reached.hops, "via": reached.via,
            "relation": reached.relation, "strength": round(reached.strength, 4)}


def entity_view(entity: EntitySummary) -> dict[str, Any]:
    return {"key": entity.key, "name": entity.name, "entity_kind": entity.kind,
            "aliases": list(entity.aliases), "records": entity.records,
            "first_seen": entity.first_seen.isoformat()}

