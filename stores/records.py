"""Records as the write path, search and the read views see them: stored once by their
deterministic id, announced once, and the writes refused with their reason. `Records` is the
contract the stream stages use; `PostgresRecords` keeps it in the source of truth.

Lookups by lists of ids join on `unnest(ids)`: with `= ANY(ids)` beside a namespace filter
the planner scanned the whole namespace (6 ms at 100k records, 0.8 ms joined).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple, Protocol

import asyncpg

from processors.api.listing import ListingPosition
from processors.knowledge.graph import GraphRecord
from processors.memory.lifecycle import RecordVersion
from processors.recall.as_of import in_force_at
from processors.recall.confidence import confidence_of
from processors.recall.contested import Contest
from processors.text.embedding import Vector
from processors.text.lexical import SparseVector
from schemas.records import Record
from stores.index.pgvector import scope_args
from stores.index.postgres_search import INDEXED, RECORD_SCOPE
from stores.index.protocol import SearchScope
from stores.postgres.rows import LIVE_MEMORY, RECORD_COLUMNS, insert_new_records, record_of
from stores.record_versions import (
    EXCERPT_CHARS,
    VERSION_COLUMNS,
    MergeMember,
    PersonalReader,
    merge_members,
    version_of,
)

# The columns of a FoundRecord.
FOUND_COLUMNS = (
    "record_id, record_kind, title, text, body, source_ref, created_at, related_ids, tags,"
    " scope, agent_id, review_state, trust_class, tier, run_ref, version, memory_type, thread,"
    " provenance, expires_at, embedding, repo, security_scope, valid_until, invalidated_by,"
    " confidence, stored_at, text_tokens, term_presence"
)
# A record's open contest (processors/recall/contested.py), read with it: the invalidation
# proposed for it that waits for a reviewer, if the memory that proposed it is in force. A
# lateral join rather than a query of its own: a search reads its records in one round trip,
# and a record without a pending diff costs one probe of a partial index that holds only the
# pending ones (migration 0006).
CONTEST_COLUMNS = "contest.diff_id AS contest_diff, contest.newer AS contested_by"
CONTEST_NOW = """
    LEFT JOIN LATERAL (
        SELECT d.diff_id, n.record_id AS newer
        FROM pending_diffs d JOIN records n ON n.record_id = d.proposed ->> 'invalidated_by'
        WHERE d.record_id = records.record_id AND d.state = 'pending'
          AND d.proposed ? 'invalidated_by' AND records.invalidated_by IS NULL
          AND records.superseded_by IS NULL
          AND n.superseded_by IS NULL AND n.invalidated_by IS NULL
          AND n.review_state <> 'deprecated' AND (n.expires_at IS NULL OR n.expires_at > now())
        ORDER BY d.proposed_at DESC, d.diff_id LIMIT 1) AS contest ON true"""
# As of the moment $3: the invalidation proposed by then (when its proposal was stored: its
# lifecycle event) and not yet decided or superseded then (migration 0028's index finds a
# record's invalidation diffs whatever their state).
CONTEST_THEN = """
    LEFT JOIN LATERAL (
        SELECT d.diff_id, d.proposed ->> 'invalidated_by' AS newer
        FROM pending_diffs d JOIN lifecycle_events e ON e.event_id = d.diff_id
        WHERE d.record_id = records.record_id AND d.proposed ? 'invalidated_by'
          AND e.applied_at <= $3 AND (d.decided_at IS NULL OR d.decided_at > $3)
        ORDER BY e.applied_at DESC, d.diff_id LIMIT 1) AS contest ON true"""


class FoundRecord(NamedTuple):
    """A record as search and context read it: its columns as stored, not a validated
    `Record` (a search reads dozens per query, a pack over a hundred: a tuple is made in a
    third of a frozen dataclass's time)."""

    record_id: str
    record_kind: str
    title: str | None
    text: str
    body: dict[str, Any]
    source_ref: str | None
    created_at: datetime
    related_ids: tuple[str, ...]
    tags: tuple[str, ...]
    scope: str
    agent_id: str | None
    review_state: str
    trust_class: str
    tier: str
    run_ref: str | None
    version: int
    memory_type: str | None
    thread: str | None
    provenance: dict[str, Any]
    expires_at: datetime | None
    embedding: Vector | None
    repo: str | None = None
    security_scope: str | None = None
    # When the fact stopped holding and the memory that said so
    # (processors/knowledge/stale_facts.py).
    valid_until: datetime | None = None
    invalidated_by: str | None = None
    # processors/recall/confidence.py; as stored, or from its fields for a record stored before.
    confidence: float = 1.0
    # When memory learned it (its first version was stored); None in hand-made records.
    recorded_at: datetime | None = None
    # Its text in the model's tokens, as the record sink counted it; None: not counted yet.
    text_tokens: int | None = None
    # How fully it holds each of its terms, by term id (processors/text/lexical.py, as stored);
    # None: stored before it was kept, or read as an earlier version.
    held_terms: Mapping[int, float] | None = None
    # The correction of it that waits for a reviewer (processors/recall/contested.py), as of
    # the moment read; None in hand-made records and in reads that do not ask.
    contested: Contest | None = None


@dataclass(frozen=True)
class StoredRecord:
    record: Record
    vector: Vector | None
    version: int
    superseded_by: str | None


@dataclass(frozen=True)
class LineageVersion:
    version: int
    text: str
    body: dict[str, Any]
    event_id: str
    changed_at: datetime


@dataclass(frozen=True)
class SupersededMember:
    record_id: str
    version: int
    title: str | None
    text: str


@dataclass(frozen=True)
class RecordExcerpt:
    """Enough of a record to name it in a list, and to tell whether a caller may see it."""

    record_id: str
    record_kind: str
    title: str | None
    # The first EXCERPT_CHARS characters of its text.
    excerpt: str
    scope: str
    agent_id: str | None


@dataclass(frozen=True)
class RelatedRecord:
    """A record found by its related ids, and how many of those asked it lists."""

    record: FoundRecord
    shared: int


@dataclass(frozen=True)
class RecordFilter:
    """What a listing shows: the live records (neither superseded nor expired) of a namespace
    that `reader` may see, in these review states, and, when given, of these kinds, memory
    types, tiers and scopes, and written by (or for) `agent_id`."""

    namespace: str
    reader: PersonalReader
    review_states: tuple[str, ...] = ("approved",)
    record_kinds: tuple[str, ...] = ()
    memory_types: tuple[str, ...] = ()
    tiers: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()
    agent_id: str | None = None


@dataclass(frozen=True)
class RecordSummary:
    """A record as a listing names it: the start of its text, for a one-line description."""

    record_id: str
    record_kind: str
    title: str | None
    # The first SUMMARY_CHARS characters of its text.
    opening: str
    memory_type: str | None
    tier: str
    scope: str
    agent_id: str | None
    review_state: str
    created_at: datetime
    updated_at: datetime


# Enough of a text for its first sentence, cut to a description (processors/api/listing.py).
SUMMARY_CHARS = 400


@dataclass(frozen=True)
class RecordLineage:
    """A record, its versions and the records it superseded (a replacement's members stay
    stored, hidden from search and reachable from here); for a merge, its members as they are
    now, superseded or not (a draft's are still live)."""

    record: Record
    version: int
    superseded_by: str | None
    versions: list[LineageVersion]
    supersedes: list[SupersededMember]
    members: list[MergeMember]
    # processors/recall/confidence.py; when memory learned it.
    confidence: float = 1.0
    recorded_at: datetime | None = None


class Records(Protocol):
    async def insert_records(
        self, records: Sequence[tuple[Record, Vector]]
    ) -> dict[str, datetime]:
        """Store new records and their first version in one transaction; existing ones stay,
        and are returned with the time they were stored. The new memories among them are
        counted in their namespace's current window."""

    async def mark_announced(self, record_ids: Sequence[str]) -> None: ...

    async def existing_record_ids(self, namespace: str,
                                  record_ids: Iterable[str]) -> set[str]: ...

    async def announced_record_ids(self, record_ids: Iterable[str]) -> set[str]: ...

    async def last_in_threads(self, namespace: str, threads: Iterable[str]) -> dict[str, Record]:
        """The latest memory stored in each of these threads of the namespace (in the order
        the writes were consumed)."""

    async def records_by_id(self, namespace: str,
                            record_ids: Sequence[str]) -> dict[str, FoundRecord]: ...

    async def records_as_of(self, namespace: str, record_ids: Sequence[str],
                            moment: datetime) -> dict[str, FoundRecord]:
        """Those of these records that were in force at `moment` (processors/recall/as_of.py), each
        with the text and fields of its version current then; its vector and confidence
        are today's."""

    async def stored_records(self, namespace: str,
                             record_ids: Sequence[str]) -> list[StoredRecord]:
        """The records with these ids in the namespace, as stored now, in id order."""

    async def unchecked_memories(self, limit: int) -> list[StoredRecord]:
        """Up to `limit` memories not yet compared with their neighbours for the facts they
        make stale, the first stored first (those out of force since among them: the caller
        marks them checked without comparing)."""

    async def mark_checked(self, record_ids: Sequence[str]) -> None:
        """Note that these memories were compared with their neighbours."""

    async def task_digests(self, namespace: str, run_ids: Sequence[str],
                           per_task: int) -> list[dict[str, Any]]:
        """The digest bodies of the runs that share a task key with these runs (theirs
        included), the latest `per_task` of each task key."""

    async def list_records(self, wanted: RecordFilter, after: ListingPosition | None,
                           limit: int) -> list[RecordSummary]:
        """Up to `limit` records of `wanted`, newest first (by created_at, then id), after
        `after` if given."""

    async def related_records(self, scope: SearchScope) -> list[RelatedRecord]:
        """The records within `scope` (as a search's: the same visibility and filters) that
        list any of its related ids, those that list the most first, then the newest."""

    async def record_excerpts(self, namespace: str,
                              record_ids: Sequence[str]) -> dict[str, RecordExcerpt]:
        """The records with these ids in the namespace, superseded or not, by id."""

    async def store_vectors(self, vectors: Sequence[tuple[str, Vector]]) -> None:
        """Keep vectors computed again for records that had none."""

    async def store_text_tokens(self, counts: Sequence[tuple[str, str, int]]) -> None:
        """Keep each record's text in the model's tokens, given as (record id, the text
        counted, its tokens): a record whose text is no longer the one counted keeps none."""

    async def record_counts(self, namespace: str) -> dict[str, int]:
        """Live records of the namespace by kind."""

    async def holds_records(self, namespace: str) -> bool:
        """Whether the namespace holds any record at all (a misspelled one holds none)."""

    async def record_lineage(self, namespace: str, record_id: str) -> RecordLineage | None: ...

    async def graph_records(self, namespace: str, reader: PersonalReader, limit: int,
                            as_of: datetime | None = None) -> list[GraphRecord]:
        """The namespace's live memories (not superseded, deprecated, invalidated or
        expired), newest first: the shared ones, and the personal ones `reader` may see; with
        `as_of`, those in force then, as they stood."""

    async def insert_refused_writes(
        self, refused: Sequence[tuple[Record, str]]
    ) -> dict[str, datetime]:
        """Record writes refused with their reason (record, reason); those recorded before
        stay, and are returned with the time they were refused."""

    async def announced_refusal_ids(self, record_ids: Iterable[str]) -> set[str]: ...

    async def mark_refusals_announced(self, record_ids: Sequence[str]) -> None: ...


class PostgresRecords:
    def __init__(self, pool: asyncpg.Pool, *, count_window: timedelta,
                 keep_windows_for: timedelta) -> None:
        self._pool = pool
        # The windows memories are counted in, for the consolidation trigger.
        self._count_window = count_window
        self._keep_windows_for = keep_windows_for

    async def insert_records(
        self, records: Sequence[tuple[Record, Vector]]
    ) -> dict[str, datetime]:
        async with self._pool.acquire() as connection, connection.transaction():
            await insert_new_records(connection, records)
            # stored_at defaults to now(), the transaction's start: it tells the rows this
            # transaction inserted from those a replay found already stored.
            await connection.execute(
                """
                WITH fresh AS (
                    SELECT namespace, count(*) AS n FROM unnest($1::text[]) AS wanted (id)
                    JOIN records ON records.record_id = wanted.id
                    WHERE record_kind = 'memory' AND stored_at = now() GROUP BY namespace),
                counted AS (
                    INSERT INTO memory_window_counts (namespace, window_start, memories)
                    SELECT namespace, to_timestamp(floor(extract(epoch FROM now()) / $2) * $2),
                           n FROM fresh
                    ON CONFLICT (namespace, window_start)
                    DO UPDATE SET memories = memory_window_counts.memories + excluded.memories)
                DELETE FROM memory_window_counts
                WHERE namespace IN (SELECT namespace FROM fresh)
                  AND window_start < now() - $3::interval
                """,
                [record.record_id for record, _ in records],
                self._count_window.total_seconds(), self._keep_windows_for,
            )
            before = await connection.fetch(
                "SELECT record_id, stored_at FROM unnest($1::text[]) AS wanted (id)"
                " JOIN records ON records.record_id = wanted.id WHERE stored_at <> now()",
                [record.record_id for record, _ in records],
            )
        return {row["record_id"]: row["stored_at"] for row in before}

    async def mark_announced(self, record_ids: Sequence[str]) -> None:
        await self._pool.execute(
            "UPDATE records SET announced_at = now() FROM unnest($1::text[]) AS wanted (id)"
            " WHERE records.record_id = wanted.id AND announced_at IS NULL",
            list(record_ids),
        )

    async def existing_record_ids(self, namespace: str, record_ids: Iterable[str]) -> set[str]:
        rows = await self._pool.fetch(
            "SELECT record_id FROM unnest($2::text[]) AS wanted (id)"
            " JOIN records ON records.record_id = wanted.id WHERE namespace = $1",
            namespace,
            list(record_ids),
        )
        return {row["record_id"] for row in rows}

    async def announced_record_ids(self, record_ids: Iterable[str]) -> set[str]:
        rows = await self._pool.fetch(
            "SELECT record_id FROM unnest($1::text[]) AS wanted (id)"
            " JOIN records ON records.record_id = wanted.id WHERE announced_at IS NOT NULL",
            list(record_ids),
        )
        return {row["record_id"] for row in rows}

    async def last_in_threads(self, namespace: str, threads: Iterable[str]) -> dict[str, Record]:
        rows = await self._pool.fetch(
            f"""
            SELECT DISTINCT ON (thread) {RECORD_COLUMNS} FROM records
            WHERE namespace = $1 AND thread = ANY($2::text[]) AND record_kind = 'memory'
            ORDER BY thread, stored_at DESC,
                     (provenance->>'source_partition')::int DESC,
                     (provenance->>'source_offset')::bigint DESC
            """,
            namespace, sorted(set(threads)),
        )
        return {row["thread"]: record_of(row) for row in rows}

    async def records_by_id(self, namespace: str,
                            record_ids: Sequence[str]) -> dict[str, FoundRecord]:
        rows = await self._pool.fetch(
            f"""
            SELECT {FOUND_COLUMNS}, {CONTEST_COLUMNS}
            FROM unnest($2::text[]) AS wanted (id)
            JOIN records ON records.record_id = wanted.id
            {CONTEST_NOW}
            WHERE namespace = $1
            """,
            namespace,
            list(record_ids),
        )
        return {row["record_id"]: _found_record(row) for row in rows}

    async def records_as_of(self, namespace: str, record_ids: Sequence[str],
                            moment: datetime) -> dict[str, FoundRecord]:
        # Both at once, on two connections: a search as of a moment waits on this read.
        rows, versions = await asyncio.gather(
            self._pool.fetch(
                f"""
                SELECT {FOUND_COLUMNS}, {CONTEST_COLUMNS}
                FROM unnest($2::text[]) AS wanted (id)
                JOIN records ON records.record_id = wanted.id
                {CONTEST_THEN}
                WHERE namespace = $1 AND stored_at <= $3
                """,
                namespace, list(record_ids), moment),
            self._pool.fetch(
                f"SELECT {VERSION_COLUMNS} FROM record_versions"
                " WHERE record_id = ANY($1::text[]) AND changed_at <= $2",
                list(record_ids), moment))
        by_record: dict[str, list[RecordVersion]] = {}
        for row in versions:
            by_record.setdefault(row["record_id"], []).append(version_of(row))
        found = {}
        for row in rows:
            then = in_force_at(by_record.get(row["record_id"], []), moment)
            if then is not None:
                found[row["record_id"]] = as_it_stood(_found_record(row), then)
        return found

    async def stored_records(self, namespace: str,
                             record_ids: Sequence[str]) -> list[StoredRecord]:
        rows = await self._pool.fetch(
            f"""
            SELECT {RECORD_COLUMNS}, version, superseded_by
            FROM unnest($2::text[]) AS wanted (id)
            JOIN records ON records.record_id = wanted.id
            WHERE namespace = $1 ORDER BY record_id
            """,
            namespace, list(record_ids),
        )
        return [StoredRecord(record_of(row), row["embedding"], int(row["version"]),
                             row["superseded_by"]) for row in rows]

    async def unchecked_memories(self, limit: int) -> list[StoredRecord]:
        rows = await self._pool.fetch(
            f"""
            SELECT {RECORD_COLUMNS}, version, superseded_by FROM records
            WHERE record_kind = 'memory' AND stale_checked_at IS NULL
            ORDER BY stored_at, record_id LIMIT $1
            """,
            limit)
        return [StoredRecord(record_of(row), row["embedding"], int(row["version"]),
                             row["superseded_by"]) for row in rows]

    async def mark_checked(self, record_ids: Sequence[str]) -> None:
        await self._pool.execute(
            "UPDATE records SET stale_checked_at = now() FROM unnest($1::text[]) AS done (id)"
            " WHERE records.record_id = done.id",
            list(record_ids))

    async def task_digests(self, namespace: str, run_ids: Sequence[str],
                           per_task: int) -> list[dict[str, Any]]:
        rows = await self._pool.fetch(
            """
            SELECT body FROM (
                SELECT d.body, row_number() OVER (PARTITION BY d.body ->> 'task_key'
                                                  ORDER BY d.created_at DESC, d.record_id) AS n
                FROM records d
                WHERE d.namespace = $1 AND d.record_kind = 'run_digest'
                  AND d.body ->> 'task_key' IN (
                      SELECT body ->> 'task_key' FROM records
                      WHERE namespace = $1 AND record_kind = 'run_digest'
                        AND run_ref = ANY($2::text[]))
            ) AS latest WHERE n <= $3
            """,
            namespace, list(run_ids), per_task)
        return [dict(row["body"]) for row in rows]

    async def list_records(self, wanted: RecordFilter, after: ListingPosition | None,
                           limit: int) -> list[RecordSummary]:
        # Keyset pagination: a record written while a reader pages never shifts the pages
        # after the one it is on, as an offset would.
        rows = await self._pool.fetch(
            f"""
            SELECT record_id, record_kind, title, left(text, $11) AS opening, memory_type, tier,
                   scope, agent_id, review_state, created_at, updated_at
            FROM records
            WHERE namespace = $1 AND {INDEXED} AND (expires_at IS NULL OR expires_at > now())
              AND (scope <> 'personal' OR $3 OR agent_id = $2)
              AND review_state = ANY($4)
              AND ($5::text[] IS NULL OR record_kind = ANY($5))
              AND ($6::text[] IS NULL OR record_kind <> 'memory' OR memory_type = ANY($6))
              AND ($7::text[] IS NULL OR tier = ANY($7))
              AND ($8::text IS NULL OR agent_id = $8)
              AND ($13::text[] IS NULL OR scope = ANY($13))
              AND ($9::timestamptz IS NULL OR (created_at, record_id) < ($9, $10))
            ORDER BY created_at DESC, record_id DESC LIMIT $12
            """,
            wanted.namespace, wanted.reader.agent_id, wanted.reader.every_agent,
            list(wanted.review_states), list(wanted.record_kinds) or None,
            list(wanted.memory_types) or None, list(wanted.tiers) or None, wanted.agent_id,
            None if after is None else after.created_at,
            None if after is None else after.record_id, SUMMARY_CHARS, limit,
            list(wanted.scopes) or None,
        )
        return [RecordSummary(
            record_id=row["record_id"], record_kind=row["record_kind"], title=row["title"],
            opening=row["opening"], memory_type=row["memory_type"], tier=row["tier"],
            scope=row["scope"], agent_id=row["agent_id"], review_state=row["review_state"],
            created_at=row["created_at"], updated_at=row["updated_at"]) for row in rows]

    async def related_records(self, scope: SearchScope) -> list[RelatedRecord]:
        rows = await self._pool.fetch(
            f"""
            SELECT {FOUND_COLUMNS}, {CONTEST_COLUMNS},
                   (SELECT count(*) FROM unnest(related_ids) AS related
                    WHERE related = ANY($4)) AS shared
            FROM records {CONTEST_NOW} WHERE {RECORD_SCOPE} AND related_ids && $4
            ORDER BY shared DESC, created_at DESC, record_id LIMIT $1
            """,
            scope.limit, *scope_args(scope),
        )
        return [RelatedRecord(_found_record(row), int(row["shared"])) for row in rows]

    async def record_excerpts(self, namespace: str,
                              record_ids: Sequence[str]) -> dict[str, RecordExcerpt]:
        rows = await self._pool.fetch(
            """
            SELECT record_id, record_kind, title, left(text, $3) AS excerpt, scope, agent_id
            FROM unnest($2::text[]) AS wanted (id)
            JOIN records ON records.record_id = wanted.id
            WHERE namespace = $1
            """,
            namespace, list(record_ids), EXCERPT_CHARS,
        )
        return {row["record_id"]: RecordExcerpt(
            row["record_id"], row["record_kind"], row["title"], row["excerpt"], row["scope"],
            row["agent_id"]) for row in rows}

    async def store_vectors(self, vectors: Sequence[tuple[str, Vector]]) -> None:
        await self._pool.executemany(
            "UPDATE records SET embedding = $2 WHERE record_id = $1", list(vectors)
        )

    async def store_text_tokens(self, counts: Sequence[tuple[str, str, int]]) -> None:
        ids, texts, tokens = zip(*counts, strict=True) if counts else ((), (), ())
        await self._pool.execute(
            "UPDATE records SET text_tokens = counted.tokens"
            " FROM unnest($1::text[], $2::text[], $3::int[]) AS counted (id, text, tokens)"
            " WHERE records.record_id = counted.id AND records.text = counted.text"
            " AND records.text_tokens IS DISTINCT FROM counted.tokens",
            list(ids), list(texts), list(tokens))

    async def record_counts(self, namespace: str) -> dict[str, int]:
        rows = await self._pool.fetch(
            "SELECT record_kind, count(*) AS n FROM records"
            " WHERE namespace = $1 AND superseded_by IS NULL GROUP BY record_kind",
            namespace,
        )
        return {row["record_kind"]: int(row["n"]) for row in rows}

    async def holds_records(self, namespace: str) -> bool:
        return bool(await self._pool.fetchval(
            "SELECT EXISTS (SELECT 1 FROM records WHERE namespace = $1)", namespace))

    async def record_lineage(self, namespace: str, record_id: str) -> RecordLineage | None:
        async with self._pool.acquire() as connection:
            row = await connection.fetchrow(
                f"SELECT {RECORD_COLUMNS}, version, superseded_by, stored_at FROM records"
                " WHERE namespace = $1 AND record_id = $2",
                namespace, record_id,
            )
            if row is None:
                return None
            versions = await connection.fetch(
                "SELECT version, text, body, event_id, changed_at FROM record_versions"
                " WHERE record_id = $1 ORDER BY version",
                record_id,
            )
            superseded = await connection.fetch(
                "SELECT record_id, version, title, text FROM records"
                " WHERE superseded_by = $1 AND namespace = $2 ORDER BY record_id",
                record_id, namespace,
            )
            members = await merge_members(
                connection, namespace, {record_id: row["body"].get("merged_from", [])})
        return RecordLineage(
            record=record_of(row),
            version=int(row["version"]),
            superseded_by=row["superseded_by"],
            versions=[LineageVersion(int(v["version"]), v["text"], v["body"], v["event_id"],
                                     v["changed_at"]) for v in versions],
            supersedes=[SupersededMember(m["record_id"], int(m["version"]), m["title"],
                                         m["text"]) for m in superseded],
            members=members[record_id],
            confidence=stored_confidence(row),
            recorded_at=row["stored_at"],
        )

    async def graph_records(self, namespace: str, reader: PersonalReader, limit: int,
                            as_of: datetime | None = None) -> list[GraphRecord]:
        if as_of is not None:
            return await self._graph_records_then(namespace, reader, limit, as_of)
        rows = await self._pool.fetch(
            f"""
            SELECT record_id, record_kind, title, left(text, $5) AS excerpt, memory_type,
                   review_state, related_ids, body->'wiki_links' AS wiki_links
            FROM records
            WHERE namespace = $1 AND {LIVE_MEMORY}
              AND (scope <> 'personal' OR $3 OR agent_id = $2)
            ORDER BY created_at DESC, record_id LIMIT $4
            """,
            namespace, reader.agent_id, reader.every_agent, limit, EXCERPT_CHARS,
        )
        return [GraphRecord(
            record_id=row["record_id"], record_kind=row["record_kind"], title=row["title"],
            excerpt=row["excerpt"], memory_type=row["memory_type"],
            review_state=row["review_state"],
            related_ids=tuple(row["related_ids"]),
            wiki_links=_strings(row["wiki_links"]),
        ) for row in rows]

    async def _graph_records_then(self, namespace: str, reader: PersonalReader, limit: int,
                                  as_of: datetime) -> list[GraphRecord]:
        # Those stored by then that were still in the index then (still are, or left after):
        # which of them were in force, and as what, their versions say.
        rows = await self._pool.fetch(
            f"""
            SELECT record_id FROM records
            WHERE namespace = $1 AND record_kind = 'memory' AND stored_at <= $4
              AND ({INDEXED} OR updated_at > $4)
              AND (expires_at IS NULL OR expires_at > $4)
              AND (scope <> 'personal' OR $3 OR agent_id = $2)
            ORDER BY created_at DESC, record_id LIMIT $5
            """,
            namespace, reader.agent_id, reader.every_agent, as_of, limit)
        then = await self.records_as_of(namespace, [row["record_id"] for row in rows], as_of)
        return [GraphRecord(
            record_id=record.record_id, record_kind=record.record_kind, title=record.title,
            excerpt=record.text[:EXCERPT_CHARS], memory_type=record.memory_type,
            review_state=record.review_state, related_ids=record.related_ids,
            wiki_links=_strings(record.body.get("wiki_links")),
        ) for row in rows if (record := then.get(row["record_id"])) is not None
            and record.review_state != "deprecated"]

    async def insert_refused_writes(
        self, refused: Sequence[tuple[Record, str]]
    ) -> dict[str, datetime]:
        async with self._pool.acquire() as connection, connection.transaction():
            await connection.executemany(
                """
                INSERT INTO refused_writes (record_id, event_id, namespace, reason, producer,
                                            source_topic, source_partition, source_offset,
                                            personal_agent)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (record_id) DO NOTHING
                """,
                [(record.record_id, record.provenance.source_event_id, record.namespace,
                  reason, record.provenance.producer, record.provenance.source_topic,
                  record.provenance.source_partition, record.provenance.source_offset,
                  record.agent_id if record.scope == "personal" else None)
                 for record, reason in refused],
            )
            # refused_at defaults to now(), the transaction's start: as for insert_records.
            before = await connection.fetch(
                "SELECT record_id, refused_at FROM unnest($1::text[]) AS wanted (id)"
                " JOIN refused_writes ON record_id = wanted.id WHERE refused_at <> now()",
                [record.record_id for record, _ in refused],
            )
        return {row["record_id"]: row["refused_at"] for row in before}

    async def announced_refusal_ids(self, record_ids: Iterable[str]) -> set[str]:
        rows = await self._pool.fetch(
            "SELECT record_id FROM unnest($1::text[]) AS wanted (id)"
            " JOIN refused_writes ON record_id = wanted.id WHERE announced_at IS NOT NULL",
            list(record_ids),
        )
        return {row["record_id"] for row in rows}

    async def mark_refusals_announced(self, record_ids: Sequence[str]) -> None:
        await self._pool.execute(
            "UPDATE refused_writes SET announced_at = now() FROM unnest($1::text[]) AS wanted"
            " (id) WHERE record_id = wanted.id AND announced_at IS NULL",
            list(record_ids),
        )


def _strings(value: Any) -> tuple[str, ...]:
    """The strings of a JSON list; none of anything else."""
    return tuple(item for item in value if isinstance(item, str)) \
        if isinstance(value, list) else ()


def _found_record(row: Mapping[str, Any]) -> FoundRecord:
    return FoundRecord(
        record_id=row["record_id"], record_kind=row["record_kind"], title=row["title"],
        text=row["text"], body=row["body"], source_ref=row["source_ref"],
        created_at=row["created_at"], related_ids=tuple(row["related_ids"]),
        tags=tuple(row["tags"]), scope=row["scope"], agent_id=row["agent_id"],
        review_state=row["review_state"], trust_class=row["trust_class"], tier=row["tier"],
        run_ref=row["run_ref"], version=int(row["version"]), memory_type=row["memory_type"],
        thread=row["thread"], provenance=row["provenance"], expires_at=row["expires_at"],
        embedding=row["embedding"], repo=row["repo"], security_scope=row["security_scope"],
        valid_until=row["valid_until"], invalidated_by=row["invalidated_by"],
        confidence=stored_confidence(row), recorded_at=row["stored_at"],
        text_tokens=row["text_tokens"], held_terms=_weights(row["term_presence"]),
        contested=_contest_of(row),
    )


def _contest_of(row: Mapping[str, Any]) -> Contest | None:
    diff_id = row.get("contest_diff")
    return None if diff_id is None else Contest(row["record_id"], row["contested_by"], diff_id)


def _weights(vector: SparseVector | None) -> dict[int, float] | None:
    return None if vector is None else vector.weights()


def stored_confidence(row: Mapping[str, Any]) -> float:
    """A record's confidence as stored, or, for one stored before confidence was kept (until
    its next change), as its fields make it without votes."""
    stored = row["confidence"]
    if stored is not None:
        # As computed: rounded to 4 places, so that 0.7 meets a threshold of 0.7.
        return round(float(stored), 4)
    return confidence_of(row["trust_class"], row["review_state"],
                         int(row["body"].get("restated", 0)))


def as_it_stood(record: FoundRecord, version: RecordVersion) -> FoundRecord:
    """`record` with the text, body and fields of one of its versions."""
    fields = version.fields
    return record._replace(
        text=version.text, body=dict(version.body), version=version.version,
        text_tokens=record.text_tokens if version.text == record.text else None,
        held_terms=record.held_terms if version.version == record.version else None,
        title=fields.get("title", record.title),
        memory_type=fields.get("memory_type", record.memory_type),
        tags=tuple(fields.get("tags", record.tags)),
        related_ids=tuple(fields.get("related_ids", record.related_ids)),
        review_state=fields.get("review_state", record.review_state),
        tier=fields.get("tier", record.tier))
