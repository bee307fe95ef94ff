"""What agents needed and memory did not hold (`memory_gaps`, `memory_gap_groups`;
processors/recall/gaps.py has the rules). `Gaps` is the contract of the retrieval log that counts
the implicit gaps, of the keeper that groups and resolves them, and of the listing;
`PostgresGaps` keeps them in the source of truth. The explicit gaps are counted by the
rating's transaction (stores/recall/ratings.py), through `count_sightings` too.

A row is one (namespace, agent, source, gap key), counted each time it is met; it joins the
group of its content terms, made with it when new. A row met again after it was resolved is
open again: what answered it did not, that time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Literal, Protocol

import asyncpg

from processors.recall.gaps import gap_key, kept_text, terms_key
from processors.text.embedding import Vector
from stores.record_versions import PersonalReader

GapSource = Literal["explicit", "implicit"]
GapStatus = Literal["open", "resolved", "all"]


@dataclass(frozen=True)
class GapSighting:
    """A gap met once: in which namespace, by which agent (none: a key bound to none),
    asking what (`text`, the question; `query`, the search that missed it), when."""

    namespace: str
    agent_id: str | None
    source: GapSource
    text: str
    query: str | None
    seen_at: datetime
    # The event that named it (an explicit gap's memory.rate).
    event_id: str | None = None


@dataclass(frozen=True)
class UnplacedGroup:
    """A group the keeper has not compared with the others yet."""

    group_id: int
    namespace: str
    question: str


@dataclass(frozen=True)
class DueCheck:
    """An open gap whose namespace announced something since it was last asked again,
    claimed (`claimed_at`) by one keeper for a while."""

    gap_id: int
    namespace: str
    agent_id: str | None
    text: str
    last_seen: datetime
    claimed_at: datetime


@dataclass(frozen=True)
class Answer:
    """The memory that answers a gap's question, and at what relevance."""

    record_id: str
    relevance: float


@dataclass(frozen=True)
class GapRow:
    gap_id: int
    agent_id: str | None
    source: GapSource
    text: str
    query: str | None
    times: int
    first_seen: datetime
    last_seen: datetime
    resolved_at: datetime | None
    resolved_by: str | None
    resolved_score: float | None


@dataclass(frozen=True)
class GapGroup:
    """A group as one reader sees it: of its rows, those the reader may see."""

    group_id: int
    times: int
    first_seen: datetime
    last_seen: datetime
    open: bool
    rows: list[GapRow]


@dataclass(frozen=True)
class GapFilter:
    namespace: str
    reader: PersonalReader
    status: GapStatus


@dataclass(frozen=True)
class GroupPosition:
    """Where a listing, most recently met first, goes on: after this group."""

    last_seen: datetime
    group_id: int


class Gaps(Protocol):
    async def count_sightings(self, sightings: Sequence[GapSighting]) -> None:
        """Count each sighting in its row, in one transaction."""

    async def unplaced_groups(self, limit: int) -> list[UnplacedGroup]:
        """The oldest groups not yet compared with the others."""

    async def place_group(self, group_id: int, namespace: str, embedding: Vector,
                          min_cosine: float) -> None:
        """Keep the group's embedding and fold it into the nearest group of its namespace
        (one folded into none) whose embedding is at least `min_cosine` from it, if any; a
        group placed already stays as it is."""

    async def due_checks(self, limit: int, lease_s: float) -> list[DueCheck]:
        """Claim, for `lease_s`, the open gaps whose namespace announced a record since the
        gap was last asked again (or last met), those waiting longest first."""

    async def checked(self, check: DueCheck, answer: Answer | None) -> bool:
        """Record a check done, and the answer it found: the gap resolved by it, unless it
        was met again meanwhile; True if this resolved it."""

    async def gap_groups(self, wanted: GapFilter, after: GroupPosition | None,
                         limit: int) -> list[GapGroup]:
        """The groups the reader sees, most recently met first."""


def counted(sightings: Sequence[GapSighting]) -> list[tuple[GapSighting, int, datetime]]:
    """The sightings by row, in key order, each as its latest sighting (its texts as a gap
    keeps them: secrets redacted), how many times it was met and when first: a row takes
    one change per statement."""
    rows: dict[tuple[str, str, str, str], tuple[GapSighting, int, datetime]] = {}
    kept = [replace(sighting, text=kept_text(sighting.text),
                    query=None if sighting.query is None else kept_text(sighting.query))
            for sighting in sightings]
    for sighting in sorted(kept, key=lambda s: s.seen_at):
        key = (sighting.namespace, sighting.agent_id or "", sighting.source,
               gap_key(sighting.text))
        _, times, first = rows.get(key, (sighting, 0, sighting.seen_at))
        rows[key] = (sighting, times + 1, first)
    return [rows[key] for key in sorted(rows)]


async def count_sightings(connection: asyncpg.Connection,
                          sightings: Sequence[GapSighting]) -> None:
    """Count sightings on `connection`, within the caller's transaction: each row's group
    made first if its content terms are new to the namespace."""
    rows = counted(sightings)
    if not rows:
        return
    namespaces = [sighting.namespace for sighting, _, _ in rows]
    terms = [terms_key(sighting.text) for sighting, _, _ in rows]
    await connection.execute(
        """
        INSERT INTO memory_gap_groups (namespace, terms_key, question)
        SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
        ORDER BY 1, 2
        ON CONFLICT (namespace, terms_key) DO NOTHING
        """,
        namespaces, terms, [sighting.text for sighting, _, _ in rows])
    await connection.execute(
        """
        INSERT INTO memory_gaps (namespace, agent_id, source, gap_key, gap, query,
                                 first_seen, last_seen, times, last_event_id, group_id)
        SELECT seen.namespace, seen.agent_id, seen.source, seen.gap_key, seen.gap,
               seen.query, seen.first_seen, seen.last_seen, seen.times, seen.event_id,
               groups.id
        FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                    $7::text[], $8::timestamptz[], $9::timestamptz[], $10::int[],
                    $11::text[])
             AS seen (namespace, agent_id, source, gap_key, terms_key, gap, query,
                      first_seen, last_seen, times, event_id)
        JOIN memory_gap_groups AS groups
          ON groups.namespace = seen.namespace AND groups.terms_key = seen.terms_key
        ORDER BY seen.namespace, seen.agent_id, seen.source, seen.gap_key
        ON CONFLICT ON CONSTRAINT memory_gaps_one_row DO UPDATE SET
            gap = EXCLUDED.gap,
            query = COALESCE(EXCLUDED.query, memory_gaps.query),
            first_seen = LEAST(memory_gaps.first_seen, EXCLUDED.first_seen),
            last_seen = GREATEST(memory_gaps.last_seen, EXCLUDED.last_seen),
            times = memory_gaps.times + EXCLUDED.times,
            last_event_id = COALESCE(EXCLUDED.last_event_id, memory_gaps.last_event_id),
            resolved_at = CASE WHEN EXCLUDED.last_seen > memory_gaps.resolved_at THEN NULL
                               ELSE memory_gaps.resolved_at END,
            resolved_by = CASE WHEN EXCLUDED.last_seen > memory_gaps.resolved_at THEN NULL
                               ELSE memory_gaps.resolved_by END,
            resolved_score = CASE WHEN EXCLUDED.last_seen > memory_gaps.resolved_at
                                  THEN NULL ELSE memory_gaps.resolved_score END
        """,
        namespaces, [sighting.agent_id for sighting, _, _ in rows],
        [sighting.source for sighting, _, _ in rows],
        [gap_key(sighting.text) for sighting, _, _ in rows], terms,
        [sighting.text for sighting, _, _ in rows], [sighting.query for sighting, _, _ in rows],
        [first for _, _, first in rows], [sighting.seen_at for sighting, _, _ in rows],
        [times for _, times, _ in rows], [sighting.event_id for sighting, _, _ in rows])


# The rows a reader sees: every agent's, or those of its agent and of no agent.
_VISIBLE = """
    SELECT gaps.*, COALESCE(groups.merged_into, groups.id) AS root
    FROM memory_gaps AS gaps JOIN memory_gap_groups AS groups ON groups.id = gaps.group_id
    WHERE gaps.namespace = $1
      AND ($2::boolean OR gaps.agent_id IS NULL OR gaps.agent_id = $3)
"""


class PostgresGaps:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def count_sightings(self, sightings: Sequence[GapSighting]) -> None:
        async with self._pool.acquire() as connection, connection.transaction():
            await count_sightings(connection, sightings)

    async def unplaced_groups(self, limit: int) -> list[UnplacedGroup]:
        rows = await self._pool.fetch(
            "SELECT id, namespace, question FROM memory_gap_groups WHERE embedding IS NULL"
            " ORDER BY id LIMIT $1", limit)
        return [UnplacedGroup(row["id"], row["namespace"], row["question"]) for row in rows]

    async def place_group(self, group_id: int, namespace: str, embedding: Vector,
                          min_cosine: float) -> None:
        async with self._pool.acquire() as connection, connection.transaction():
            # One namespace's groups are placed one at a time: two new groups of the same
            # question placed together would each find no other and stay apart.
            await connection.execute("SELECT pg_advisory_xact_lock(hashtext($1))",
                                     "memory_gap_groups:" + namespace)
            nearest = await connection.fetchrow(
                """
                SELECT id, 1 - (embedding <=> $3) AS cosine FROM memory_gap_groups
                WHERE namespace = $1 AND id <> $2 AND merged_into IS NULL
                  AND embedding IS NOT NULL
                ORDER BY embedding <=> $3, id LIMIT 1
                """,
                namespace, group_id, embedding)
            root = nearest["id"] if nearest is not None and nearest["cosine"] >= min_cosine \
                else None
            await connection.execute(
                "UPDATE memory_gap_groups SET embedding = $2, merged_into = $3"
                " WHERE id = $1 AND embedding IS NULL", group_id, embedding, root)

    async def due_checks(self, limit: int, lease_s: float) -> list[DueCheck]:
        rows = await self._pool.fetch(
            """
            WITH fresh AS (
                SELECT spaces.namespace,
                       (SELECT max(announced_at) FROM records
                        WHERE records.namespace = spaces.namespace) AS newest
                FROM (SELECT DISTINCT namespace FROM memory_gaps
                      WHERE resolved_at IS NULL) AS spaces
            ), due AS (
                SELECT gaps.id FROM memory_gaps AS gaps JOIN fresh USING (namespace)
                WHERE gaps.resolved_at IS NULL
                  AND fresh.newest > GREATEST(gaps.checked_at, gaps.last_seen)
                  AND (gaps.checking_until IS NULL OR gaps.checking_until < now())
                ORDER BY GREATEST(gaps.checked_at, gaps.last_seen), gaps.id
                LIMIT $1
                FOR UPDATE OF gaps SKIP LOCKED
            )
            UPDATE memory_gaps AS gaps
            SET checking_until = now() + make_interval(secs => $2)
            FROM due WHERE gaps.id = due.id
            RETURNING gaps.id, gaps.namespace, gaps.agent_id, gaps.gap, gaps.last_seen,
                      now() AS claimed_at
            """,
            limit, lease_s)
        return sorted((DueCheck(row["id"], row["namespace"], row["agent_id"], row["gap"],
                                row["last_seen"], row["claimed_at"]) for row in rows),
                      key=lambda check: (check.last_seen, check.gap_id))

    async def checked(self, check: DueCheck, answer: Answer | None) -> bool:
        async with self._pool.acquire() as connection, connection.transaction():
            await connection.execute(
                "UPDATE memory_gaps SET checked_at = $2, checking_until = NULL WHERE id = $1",
                check.gap_id, check.claimed_at)
            if answer is None:
                return False
            resolved = await connection.fetchval(
                """
                UPDATE memory_gaps SET resolved_at = now(), resolved_by = $3,
                                       resolved_score = $4
                WHERE id = $1 AND resolved_at IS NULL AND last_seen = $2
                RETURNING id
                """,
                check.gap_id, check.last_seen, answer.record_id, answer.relevance)
        return resolved is not None

    async def gap_groups(self, wanted: GapFilter, after: GroupPosition | None,
                         limit: int) -> list[GapGroup]:
        visibility = (wanted.namespace, wanted.reader.every_agent, wanted.reader.agent_id)
        async with self._pool.acquire() as connection:
            groups = await connection.fetch(
                f"""
                WITH visible AS ({_VISIBLE})
                SELECT root, sum(times)::bigint AS times, min(first_seen) AS first_seen,
                       max(last_seen) AS last_seen, bool_or(resolved_at IS NULL) AS open
                FROM visible GROUP BY root
                HAVING ($4 = 'all' OR bool_or(resolved_at IS NULL) = ($4 = 'open'))
                   AND ($5::timestamptz IS NULL OR (max(last_seen), root) < ($5, $6))
                ORDER BY max(last_seen) DESC, root DESC
                LIMIT $7
                """,
                *visibility, wanted.status, None if after is None else after.last_seen,
                None if after is None else after.group_id, limit)
            rows = await connection.fetch(
                f"""
                WITH visible AS ({_VISIBLE})
                SELECT * FROM visible WHERE root = ANY($4::bigint[])
                ORDER BY times DESC, last_seen DESC, id
                """,
                *visibility, [group["root"] for group in groups])
        members: dict[int, list[GapRow]] = {}
        for row in rows:
            members.setdefault(row["root"], []).append(GapRow(
                row["id"], row["agent_id"], row["source"], row["gap"], row["query"],
                row["times"], row["first_seen"], row["last_seen"], row["resolved_at"],
                row["resolved_by"], row["resolved_score"]))
        return [GapGroup(group["root"], group["times"], group["first_seen"],
                         group["last_seen"], group["open"], members[group["root"]])
                for group in groups]
