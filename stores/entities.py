"""The entities records mention (processors/knowledge/entities.py), and the links a graph walk
follows: between records (related ids, wiki-links), from a record to the entities it mentions, from
an entity to the records that mention it and to the entities a sentence relates it to. `Entities` is
the contract the entity indexer (streams/stages/knowledge/entity_index.py) and the reads use;
`PostgresEntities` keeps it.

Like the vector index, what is here is derived from the records and can be rebuilt from them;
unlike it, it is kept off the write path: the indexer catches up with every record whose
current version it has not read (`records.entities_version`), a second or so behind. A
record's wiki-links name pages: a link resolves to the records whose title names the same
entity (its `page` key).

Every read keeps to what the reader may see: the namespace's live records (neither merged,
expired nor invalidated), shared or in the reader's own vault.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import asyncpg

from processors.knowledge.entities import (
    NOT_CO_MENTIONED,
    Mention,
    RecordEntities,
    co_mention_confidence,
)
from processors.knowledge.graph import ENTITY_PREFIX, Link
from schemas.records import Record
from stores.index.postgres_search import in_index
from stores.postgres.rows import RECORD_COLUMNS, record_of
from stores.record_versions import PersonalReader

# A record the reader may see and that is in force ($1 namespace, $2 agent, $3 every agent),
# now or, when $4 is a moment, then: stored by then, and in the index or out of it since.
_VISIBLE = f"""t.namespace = $1 AND (t.scope <> 'personal' OR $3 OR t.agent_id = $2)
    AND CASE WHEN $4::timestamptz IS NULL
        THEN {in_index("t")} AND (t.expires_at IS NULL OR t.expires_at > now())
        ELSE t.stored_at <= $4 AND ({in_index("t")} OR t.updated_at > $4)
             AND (t.expires_at IS NULL OR t.expires_at > $4) END"""


@dataclass(frozen=True)
class EntitySummary:
    key: str
    name: str
    kind: str
    aliases: tuple[str, ...]
    first_seen: datetime
    # Live records that mention it and that the reader may see.
    records: int


@dataclass(frozen=True)
class EntityRelation:
    """A relation of an entity: stated in sentences (`origin` pattern, wiki_link, llm) or
    read from the records that name both (`co_mention`), with the records that show it and a
    confidence (a stated one's highest; a co-mention's from how many records,
    processors/knowledge/entities.py `co_mention_confidence`)."""

    source: str
    target: str
    relation: str
    origin: str
    confidence: float
    records: int
    evidence: tuple[str, ...]


class Entities(Protocol):
    async def index_entities(self, found: Sequence[RecordEntities]) -> None:
        """Replace what the rules found in these records by what they find now, and mark
        each version read."""

    async def due(self, limit: int) -> list[tuple[Record, int]]:
        """Up to `limit` records the index holds whose current version's entities are not
        indexed yet, the first stored first, with that version."""

    async def entities(self, namespace: str, keys: Sequence[str], reader: PersonalReader,
                       as_of: datetime | None = None) -> dict[str, EntitySummary]:
        """These entities of the namespace, by key, with how many records mention them
        (that were in force at `as_of`, when given)."""

    async def unread_by_llm(self, limit: int) -> list[tuple[Record, int]]:
        """Up to `limit` live records (memories, digests, chunks) whose current version the
        LLM hook was not asked about yet, the latest stored first, with that version."""

    async def add_llm_mentions(self, namespace: str, record_id: str, version: int,
                               mentions: Sequence[Mention]) -> None:
        """Keep what the hook named in one version of a record (replacing what it named in
        an earlier one), and that it was asked."""

    async def relations_of(self, namespace: str, key: str, reader: PersonalReader,
                           limit: int) -> list[EntityRelation]:
        """An entity's relations, stated ones first, then those it is co-mentioned in, the
        strongest first; each with up to 5 of its evidence records (those the reader may
        see, in force)."""

    async def mentioned_in(self, namespace: str,
                           record_ids: Sequence[str]) -> list[tuple[str, EntitySummary]]:
        """The entities these records mention, as (record id, entity), each entity with how
        many of these records mention it."""

    async def find_entities(self, namespace: str, reader: PersonalReader, prefix: str | None,
                            limit: int) -> list[EntitySummary]:
        """The namespace's entities most mentioned first (those whose key starts with the
        key of `prefix` only, when given)."""

    async def record_links(self, namespace: str, record_ids: Sequence[str],
                           reader: PersonalReader, as_of: datetime | None = None
                           ) -> list[Link]:
        """The links around these records: related ids and wiki-links both ways, and the
        entities they mention (to records in force at `as_of`, when given)."""

    async def entity_links(self, namespace: str, keys: Sequence[str], reader: PersonalReader,
                           per_entity: int, as_of: datetime | None = None) -> list[Link]:
        """The links around these entities: the records that mention each (the latest
        `per_entity`), and the relations sentences state between it and other entities
        (of records in force at `as_of`, when given)."""


class PostgresEntities:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def index_entities(self, found: Sequence[RecordEntities]) -> None:
        if not found:
            return
        async with self._pool.acquire() as connection, connection.transaction():
            await index_record_entities(connection, found)

    async def due(self, limit: int) -> list[tuple[Record, int]]:
        rows = await self._pool.fetch(
            f"""
            SELECT {RECORD_COLUMNS}, version FROM records
            WHERE entities_version IS DISTINCT FROM version
              AND superseded_by IS NULL AND expired_at IS NULL AND invalidated_by IS NULL
            ORDER BY stored_at LIMIT $1
            """,
            limit)
        return [(record_of(row), int(row["version"])) for row in rows]

    async def unread_by_llm(self, limit: int) -> list[tuple[Record, int]]:
        rows = await self._pool.fetch(
            f"""
            SELECT {RECORD_COLUMNS}, version FROM records t
            WHERE {in_index("t")} AND NOT EXISTS (
                SELECT 1 FROM entity_llm_reads r
                WHERE r.record_id = t.record_id AND r.version = t.version)
            ORDER BY stored_at DESC, record_id LIMIT $1
            """,
            limit)
        return [(record_of(row), int(row["version"])) for row in rows]

    async def add_llm_mentions(self, namespace: str, record_id: str, version: int,
                               mentions: Sequence[Mention]) -> None:
        async with self._pool.acquire() as connection, connection.transaction():
            await connection.execute(
                "DELETE FROM entity_mentions WHERE record_id = $1 AND origin = 'llm'", record_id)
            await connection.executemany(
                """
                INSERT INTO entities (namespace, entity_key, name, kind, aliases)
                VALUES ($1, $2, $3, $4, $5) ON CONFLICT (namespace, entity_key) DO NOTHING
                """,
                [(namespace, mention.key, mention.name, mention.kind, list(mention.aliases))
                 for mention in sorted(mentions, key=lambda mention: mention.key)])
            await connection.executemany(
                "INSERT INTO entity_mentions (namespace, entity_key, record_id, source, origin,"
                " version) VALUES ($1, $2, $3, $4, 'llm', $5) ON CONFLICT DO NOTHING",
                [(namespace, mention.key, record_id, mention.source, version)
                 for mention in mentions])
            await connection.execute(
                "INSERT INTO entity_llm_reads (record_id, version, named) VALUES ($1, $2, $3)"
                " ON CONFLICT DO NOTHING", record_id, version, len(mentions))

    async def relations_of(self, namespace: str, key: str, reader: PersonalReader,
                           limit: int) -> list[EntityRelation]:
        async with self._pool.acquire() as connection:
            stated = await connection.fetch(
                f"""
                SELECT r.source_key, r.target_key, r.relation, r.origin,
                       max(r.confidence) AS confidence, count(DISTINCT r.record_id) AS records,
                       (array_agg(DISTINCT r.record_id))[1:5] AS evidence
                FROM entity_relations r JOIN records t ON t.record_id = r.record_id
                WHERE r.namespace = $1 AND (r.source_key = $5 OR r.target_key = $5)
                  AND {_VISIBLE}
                GROUP BY r.source_key, r.target_key, r.relation, r.origin
                ORDER BY confidence DESC, records DESC, r.source_key, r.target_key LIMIT $6
                """,
                namespace, reader.agent_id, reader.every_agent, None, key, limit)
            together = await connection.fetch(
                f"""
                SELECT other.entity_key, count(DISTINCT other.record_id) AS records,
                       (array_agg(DISTINCT other.record_id))[1:5] AS evidence
                FROM entity_mentions mine
                JOIN entity_mentions other ON other.namespace = mine.namespace
                     AND other.record_id = mine.record_id AND other.entity_key <> mine.entity_key
                JOIN records t ON t.record_id = mine.record_id
                WHERE mine.namespace = $1 AND mine.entity_key = $5 AND mine.source <> 'title'
                  AND other.source <> 'title' AND other.source <> ALL($7::text[])
                  AND {_VISIBLE}
                GROUP BY other.entity_key
                ORDER BY records DESC, other.entity_key LIMIT $6
                """,
                namespace, reader.agent_id, reader.every_agent, None, key, limit,
                sorted(NOT_CO_MENTIONED))
        return [EntityRelation(row["source_key"], row["target_key"], row["relation"],
                               row["origin"], float(row["confidence"]), int(row["records"]),
                               tuple(row["evidence"])) for row in stated] + [
            EntityRelation(key, row["entity_key"], "co_mentioned", "co_mention",
                           co_mention_confidence(int(row["records"])), int(row["records"]),
                           tuple(row["evidence"])) for row in together]

    async def mentioned_in(self, namespace: str,
                           record_ids: Sequence[str]) -> list[tuple[str, EntitySummary]]:
        rows = await self._pool.fetch(
            """
            SELECT m.record_id, e.entity_key, e.name, e.kind, e.aliases, e.first_seen,
                   count(*) OVER (PARTITION BY e.entity_key) AS records
            FROM (SELECT DISTINCT record_id, entity_key FROM entity_mentions
                  WHERE namespace = $1 AND record_id = ANY($2::text[])
                    AND source <> 'title') AS m
            JOIN entities e ON e.namespace = $1 AND e.entity_key = m.entity_key
            ORDER BY m.record_id, e.entity_key
            """,
            namespace, list(record_ids))
        return [(row["record_id"], _summary(row)) for row in rows]

    async def entities(self, namespace: str, keys: Sequence[str], reader: PersonalReader,
                       as_of: datetime | None = None) -> dict[str, EntitySummary]:
        rows = await self._pool.fetch(
            f"""
            SELECT e.entity_key, e.name, e.kind, e.aliases, e.first_seen,
                   (SELECT count(DISTINCT m.record_id) FROM entity_mentions m
                    JOIN records t ON t.record_id = m.record_id
                    WHERE m.namespace = $1 AND m.entity_key = e.entity_key
                      AND m.source <> 'title' AND {_VISIBLE}) AS records
            FROM entities e WHERE e.namespace = $1 AND e.entity_key = ANY($5::text[])
            """,
            namespace, reader.agent_id, reader.every_agent, as_of, list(keys))
        return {row["entity_key"]: _summary(row) for row in rows}

    async def find_entities(self, namespace: str, reader: PersonalReader, prefix: str | None,
                            limit: int) -> list[EntitySummary]:
        rows = await self._pool.fetch(
            f"""
            SELECT e.entity_key, e.name, e.kind, e.aliases, e.first_seen,
                   count(DISTINCT m.record_id) AS records
            FROM entity_mentions m
            JOIN records t ON t.record_id = m.record_id
            JOIN entities e ON e.namespace = m.namespace AND e.entity_key = m.entity_key
            WHERE m.namespace = $1 AND m.source <> 'title' AND {_VISIBLE}
              AND ($5::text IS NULL OR left(m.entity_key, length($5)) = $5)
            GROUP BY e.entity_key, e.name, e.kind, e.aliases, e.first_seen
            ORDER BY records DESC, e.entity_key LIMIT $6
            """,
            namespace, reader.agent_id, reader.every_agent, None, prefix, limit)
        return [_summary(row) for row in rows]

    async def record_links(self, namespace: str, record_ids: Sequence[str],
                           reader: PersonalReader, as_of: datetime | None = None) -> list[Link]:
        rows = await self._pool.fetch(
            f"""
            SELECT f.record_id AS source, t.record_id AS target, 'related' AS relation
            FROM records f CROSS JOIN LATERAL unnest(f.related_ids) AS named (id)
            JOIN records t ON t.record_id = named.id
            WHERE f.namespace = $1 AND f.record_id = ANY($5::text[]) AND {_VISIBLE}
            UNION
            SELECT named.id, t.record_id, 'related'
            FROM unnest($5::text[]) AS named (id)
            JOIN records t ON t.related_ids @> ARRAY[named.id]
            WHERE {_VISIBLE}
            UNION
            SELECT m.record_id, t.record_id, 'wiki_link'
            FROM entity_mentions m
            JOIN entity_mentions p ON p.namespace = m.namespace AND p.entity_key = m.entity_key
                                  AND p.source = 'title'
            JOIN records t ON t.record_id = p.record_id
            WHERE m.namespace = $1 AND m.record_id = ANY($5::text[]) AND m.source = 'wiki_link'
              AND {_VISIBLE}
            UNION
            SELECT p.record_id, t.record_id, 'wiki_link'
            FROM entity_mentions p
            JOIN entity_mentions m ON m.namespace = p.namespace AND m.entity_key = p.entity_key
                                  AND m.source = 'wiki_link'
            JOIN records t ON t.record_id = m.record_id
            WHERE p.namespace = $1 AND p.record_id = ANY($5::text[]) AND p.source = 'title'
              AND {_VISIBLE}
            UNION
            SELECT m.record_id, '{ENTITY_PREFIX}' || m.entity_key, 'mentions'
            FROM entity_mentions m
            WHERE m.namespace = $1 AND m.record_id = ANY($5::text[]) AND m.source <> 'title'
            """,
            namespace, reader.agent_id, reader.every_agent, as_of, list(record_ids))
        return [Link(row["source"], row["target"], row["relation"]) for row in rows
                if row["source"] != row["target"]]

    async def entity_links(self, namespace: str, keys: Sequence[str], reader: PersonalReader,
                           per_entity: int, as_of: datetime | None = None) -> list[Link]:
        rows = await self._pool.fetch(
            f"""
            SELECT '{ENTITY_PREFIX}' || named.key AS source, mentioned.record_id AS target,
                   'mentioned_by' AS relation, 1.0::real AS weight, mentioned.records
            FROM unnest($5::text[]) AS named (key)
            CROSS JOIN LATERAL (
                SELECT t.record_id, count(*) OVER () AS records
                FROM entity_mentions m JOIN records t ON t.record_id = m.record_id
                WHERE m.namespace = $1 AND m.entity_key = named.key AND m.source <> 'title'
                  AND {_VISIBLE}
                GROUP BY t.record_id, t.created_at
                ORDER BY t.created_at DESC, t.record_id LIMIT $6) AS mentioned
            UNION ALL
            SELECT '{ENTITY_PREFIX}' || r.source_key, '{ENTITY_PREFIX}' || r.target_key,
                   r.relation, max(r.confidence), count(DISTINCT r.record_id)
            FROM entity_relations r JOIN records t ON t.record_id = r.record_id
            WHERE r.namespace = $1 AND {_VISIBLE}
              AND (r.source_key = ANY($5::text[]) OR r.target_key = ANY($5::text[]))
            GROUP BY r.source_key, r.target_key, r.relation
            """,
            namespace, reader.agent_id, reader.every_agent, as_of, list(keys), per_entity)
        return [Link(row["source"], row["target"], row["relation"], float(row["weight"]),
                     int(row["records"])) for row in rows]


async def index_record_entities(connection: asyncpg.Connection,
                                found: Sequence[RecordEntities]) -> None:
    """Replace what the rules found in these records (in the caller's transaction)."""
    ids = [item.record_id for item in found]
    await connection.execute(
        "DELETE FROM entity_mentions WHERE record_id = ANY($1::text[])"
        " AND origin = 'rules'", ids)
    await connection.execute(
        "DELETE FROM entity_relations WHERE record_id = ANY($1::text[])"
        " AND origin <> 'llm'", ids)
    named = {(item.namespace, mention.key): mention for item in found
             for mention in item.mentions}
    # In key order: two sinks indexing records that name the same entities lock
    # their rows in one order, never crosswise.
    await connection.executemany(
        """
        INSERT INTO entities (namespace, entity_key, name, kind, aliases)
        VALUES ($1, $2, $3, $4, $5)
        ON CONFLICT (namespace, entity_key) DO UPDATE SET aliases = ARRAY(
            SELECT DISTINCT unnest(entities.aliases || EXCLUDED.aliases) LIMIT 32)
        WHERE NOT entities.aliases @> EXCLUDED.aliases
        """,
        [(namespace, key, mention.name, mention.kind, list(mention.aliases))
         for (namespace, key), mention in sorted(named.items())])
    await connection.executemany(
        "INSERT INTO entity_mentions (namespace, entity_key, record_id, source, origin,"
        " version) VALUES ($1, $2, $3, $4, 'rules', $5) ON CONFLICT DO NOTHING",
        [row for item in found for row in _mention_rows(item)])
    await connection.executemany(
        "INSERT INTO entity_relations (namespace, source_key, target_key, relation,"
        " record_id, origin, evidence, confidence) VALUES ($1, $2, $3, $4, $5, $6, $7,"
        " $8) ON CONFLICT DO NOTHING",
        [(item.namespace, relation.source, relation.target, relation.relation,
          item.record_id, relation.origin, relation.evidence, relation.confidence)
         for item in found for relation in item.relations])
    await connection.execute(
        "UPDATE records SET entities_version = read.version"
        " FROM unnest($1::text[], $2::integer[]) AS read (id, version)"
        " WHERE records.record_id = read.id",
        ids, [item.version for item in found])


def _mention_rows(item: RecordEntities) -> list[tuple[str, str, str, str, int]]:
    rows: list[tuple[str, str, str, str, int]] = [
        (item.namespace, mention.key, item.record_id, mention.source, item.version)
        for mention in item.mentions]
    if item.page is not None:
        rows.append((item.namespace, item.page, item.record_id, "title", item.version))
    return rows


def _summary(row: asyncpg.Record) -> EntitySummary:
    return EntitySummary(row["entity_key"], row["name"], row["kind"], tuple(row["aliases"]),
                         row["first_seen"], int(row["records"]))
