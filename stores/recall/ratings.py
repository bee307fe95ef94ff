"""What agents make of their memories: their ratings (`memory_valuations`), the gaps they
name (`memory_gaps`), and per (agent, memory) the inputs of the adaptive score
(`memory_scores`). `Ratings` is the contract the rating stage and the reads use;
`PostgresRatings` keeps it in the source of truth. A gap is counted as stores/recall/gaps.py counts
every gap, in the rating's transaction. The accesses in `memory_scores` are
counted by stores/recall/retrievals.py, in the transaction that writes the retrieval log.

The score itself is not stored: it decays with time since the last access and the last
rating, so it is computed from these inputs when a recall reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import asyncpg

from processors.recall.adaptive_scoring import MemoryUse
from stores.postgres.rows import refresh_confidence
from stores.recall.gaps import GapSighting, count_sightings


@dataclass(frozen=True)
class Gap:
    """What the rater needed and memory did not hold, with the search that missed it."""

    text: str
    query: str | None


@dataclass(frozen=True)
class NewRating:
    """One `memory.rate` event as stored: its ratings, each (memory id, useful)."""

    event_id: str
    namespace: str
    agent_id: str
    valued_at: datetime
    ratings: Sequence[tuple[str, bool]]
    gap: Gap | None


@dataclass(frozen=True)
class Valuation:
    event_id: str
    useful: bool
    valued_at: datetime


class Ratings(Protocol):
    async def apply_rating(self, rating: NewRating) -> bool:
        """Store a rating and move its memories' score inputs, in one transaction; False
        (and nothing changed) if its event was applied before."""

    async def score_inputs(self, namespace: str, agent_id: str,
                           memory_ids: Sequence[str]) -> dict[str, MemoryUse]:
        """What the agent did with those of these memories it rated or read (the adaptive
        score's inputs), by memory id."""

    async def valuations(self, namespace: str, agent_id: str, memory_id: str,
                         limit: int) -> list[Valuation]:
        """The agent's latest ratings of one memory, newest first."""

    async def users_of(self, namespace: str, memory_id: str,
                       limit: int) -> dict[str, MemoryUse]:
        """What each agent that rated or read one memory did with it, by agent id: the
        latest users first, at most `limit`."""


class PostgresRatings:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def apply_rating(self, rating: NewRating) -> bool:
        ordered = sorted(rating.ratings)
        async with self._pool.acquire() as connection, connection.transaction():
            # The event's rows are the proof it was applied: only what they add moves the
            # scores, so a replay, even one racing the first try, adds nothing.
            added = await connection.fetch(
                """
                INSERT INTO memory_valuations (event_id, memory_id, namespace, agent_id,
                                               useful, valued_at)
                SELECT $1, memory_id, $2, $3, useful, $4
                FROM unnest($5::text[], $6::boolean[]) AS rated (memory_id, useful)
                ON CONFLICT (event_id, memory_id) DO NOTHING
                RETURNING memory_id, useful
                """,
                rating.event_id, rating.namespace, rating.agent_id, rating.valued_at,
                [memory_id for memory_id, _ in ordered], [useful for _, useful in ordered])
            if not added:
                return False
            # In key order, as the retrieval log's accesses are: two transactions never wait
            # on each other's rows crosswise.
            rows = sorted((row["memory_id"], row["useful"]) for row in added)
            await connection.execute(
                """
                INSERT INTO memory_scores (namespace, agent_id, memory_id, valuation_count,
                                           useful_count, last_valuation_at)
                SELECT $1, $2, memory_id, 1, useful::int, $3
                FROM unnest($4::text[], $5::boolean[]) AS rated (memory_id, useful)
                ORDER BY memory_id
                ON CONFLICT (namespace, agent_id, memory_id) DO UPDATE SET
                    valuation_count = memory_scores.valuation_count + 1,
                    useful_count = memory_scores.useful_count + EXCLUDED.useful_count,
                    last_valuation_at = GREATEST(memory_scores.last_valuation_at,
                                                 EXCLUDED.last_valuation_at),
                    updated_at = now()
                """,
                rating.namespace, rating.agent_id, rating.valued_at,
                [memory_id for memory_id, _ in rows], [useful for _, useful in rows])
            # Agents' votes are part of a memory's confidence (processors/recall/confidence.py).
            await refresh_confidence(connection, rating.namespace,
                                     [memory_id for memory_id, _ in rows])
            if rating.gap is not None:
                await count_sightings(connection, [GapSighting(
                    rating.namespace, rating.agent_id, "explicit", rating.gap.text,
                    rating.gap.query, rating.valued_at, rating.event_id)])
        return True

    async def score_inputs(self, namespace: str, agent_id: str,
                           memory_ids: Sequence[str]) -> dict[str, MemoryUse]:
        rows = await self._pool.fetch(
            """
            SELECT memory_id, valuation_count, useful_count, last_valuation_at, access_count,
                   last_access_at
            FROM memory_scores
            WHERE namespace = $1 AND agent_id = $2 AND memory_id = ANY($3::text[])
            """,
            namespace, agent_id, list(memory_ids))
        return {row["memory_id"]: use_of(row) for row in rows}

    async def valuations(self, namespace: str, agent_id: str, memory_id: str,
                         limit: int) -> list[Valuation]:
        rows = await self._pool.fetch(
            """
            SELECT event_id, useful, valued_at FROM memory_valuations
            WHERE namespace = $1 AND memory_id = $2 AND agent_id = $3
            ORDER BY valued_at DESC, event_id LIMIT $4
            """,
            namespace, memory_id, agent_id, limit)
        return [Valuation(row["event_id"], row["useful"], row["valued_at"]) for row in rows]

    async def users_of(self, namespace: str, memory_id: str,
                       limit: int) -> dict[str, MemoryUse]:
        rows = await self._pool.fetch(
            """
            SELECT agent_id, valuation_count, useful_count, last_valuation_at, access_count,
                   last_access_at
            FROM memory_scores WHERE namespace = $1 AND memory_id = $2
            ORDER BY updated_at DESC, agent_id LIMIT $3
            """,
            namespace, memory_id, limit)
        return {row["agent_id"]: use_of(row) for row in rows}


def use_of(row: asyncpg.Record) -> MemoryUse:
    """A `memory_scores` row as the formula's inputs."""
    return MemoryUse(
        useful_count=row["useful_count"], valuation_count=row["valuation_count"],
        last_valued_at=row["last_valuation_at"], access_count=row["access_count"],
        last_accessed_at=row["last_access_at"])
