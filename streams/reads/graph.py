"""The graph of a namespace's memories, read: the memories drawn with their links
(processors/knowledge/graph.py says how links resolve) and the entities two or more of them
mention; a walk from records or an entity along links and shared entities, a few hops out;
an entity's page; the neighbourhood of a record or an entity.

A walk counts hops between records: a related id or a wiki-link is one, and so is an entity
two records share (record, entity, record). Each hop reads the links around its frontier in
two queries (stores/entities.py) and keeps each node's strongest links
(processors/knowledge/graph.py `step`), so a walk of three hops costs six small queries
however large the namespace.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from processors.knowledge.entities import entity_key
from processors.knowledge.graph import (
    ENTITY_PREFIX,
    FAN_OUT,
    MAX_REACHED,
    Link,
    MemoryGraph,
    Reached,
    is_entity,
    memory_graph,
    step,
)
from stores.entities import Entities, EntityRelation, EntitySummary
from stores.record_versions import PersonalReader
from stores.records import FoundRecord, Records

MAX_DEPTH = 3

# Records of an entity a walk follows: the latest that mention it.
PER_ENTITY = 20

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



@dataclass(frozen=True)
class SharedEntities:
    """The entities two or more records mention, and each mention (record id, entity)."""

    entities: list[EntitySummary]
    mentions: list[tuple[str, EntitySummary]]


@dataclass(frozen=True)
class DrawnGraph:
    """A namespace's memories as drawn: at most the limit asked (`truncated` when there were
    more), their links, and the entities they share when asked."""

    graph: MemoryGraph
    truncated: bool
    shared: SharedEntities | None


async def drawn_graph(records: Records, entities: Entities, namespace: str,
                      reader: PersonalReader, limit: int, as_of: datetime | None,
                      with_entities: bool) -> DrawnGraph:
    """The memories the reader may see (with `as_of`, those in force then, as they stood) and
    their links; with `with_entities`, the entities two or more of them mention."""
    # One more than asked tells whether the graph was cut.
    found = await records.graph_records(namespace, reader, limit + 1, as_of)
    graph = memory_graph(found[:limit])
    shared = await shared_entities(entities, namespace, [node.record_id for node in graph.nodes]) \
        if with_entities else None
    return DrawnGraph(graph, len(found) > limit, shared)


async def shared_entities(entities: Entities, namespace: str,
                          record_ids: Sequence[str]) -> SharedEntities:
    """The entities two or more of these records mention (one only a record mentions links
    nothing in a picture), and their mentions."""
    mentioned = [(record_id, entity) for record_id, entity in
                 await entities.mentioned_in(namespace, record_ids) if entity.records > 1]
    shown = {entity.key: entity for _, entity in mentioned}
    return SharedEntities(list(shown.values()), mentioned)


@dataclass(frozen=True)
class EntityPage:
    """An entity, its relations with their evidence and confidence, and the latest records
    that mention it which the reader may see."""

    entity: EntitySummary
    relations: list[EntityRelation]
    mentioned_by: list[FoundRecord]


async def entity_page(records: Records, entities: Entities, namespace: str, name: str,
                      reader: PersonalReader) -> EntityPage | None:
    """An entity (by its name or key); None when no record the reader may see mentions it."""
    key = entity_key(name)
    found = (await entities.entities(namespace, [key], reader)).get(key) if key else None
    if found is None or found.records == 0:
        return None
    relations = await entities.relations_of(namespace, key, reader, ENTITY_SHOWN)
    mentioned = [link.target for link in await entities.entity_links(
        namespace, [key], reader, ENTITY_SHOWN) if link.relation == "mentioned_by"]
    shown = await readable(records, namespace, mentioned, reader, None)
    return EntityPage(found, list(relations),
                      [record for record_id in mentioned if (record := shown.get(record_id))])


@dataclass(frozen=True)
class Neighbourhood:
    """What a walk from `start` reached within `depth` hops: the walk, and of its nodes the
    records the reader may see and the entities they name."""

    start: str
    depth: int
    walk: Walk
    records: dict[str, FoundRecord]
    entities: dict[str, EntitySummary]


async def neighbourhood(records: Records, entities: Entities, namespace: str, start: str,
                        depth: int, reader: PersonalReader,
                        as_of: datetime | None) -> Neighbourhood | None:
    """The records and entities around a record or an entity (`entity:` and its key), in
    force now or at `as_of`; None when the start is none the reader may see (an entity only
    records the reader may not see mention is none of its business)."""
    if is_entity(start):
        key = start[len(ENTITY_PREFIX):]
        known = await entities.entities(namespace, [key], reader, as_of)
        if key not in known or known[key].records == 0:
            return None
    elif not await readable(records, namespace, [start], reader, as_of):
        return None
    found = await walk(entities, namespace, [start], depth, reader, as_of)
    record_ids = [node for node in found.reached if not is_entity(node)]
    keys = [node[len(ENTITY_PREFIX):] for node in found.reached if is_entity(node)]
    shown = await readable(records, namespace, record_ids, reader, as_of)
    named = await entities.entities(namespace, keys, reader, as_of) if keys else {}
    return Neighbourhood(start, depth, found, shown, dict(named))


async def readable(records: Records, namespace: str, record_ids: Sequence[str],
                   reader: PersonalReader, as_of: datetime | None) -> dict[str, FoundRecord]:
    """Those of these records the reader may see: in force now, or at `as_of`."""
    found = await (records.records_by_id(namespace, record_ids) if as_of is None
                   else records.records_as_of(namespace, record_ids, as_of))
    return {record_id: record for record_id, record in found.items()
            if record.scope == "shared" or reader.every_agent
            or record.agent_id == reader.agent_id}
