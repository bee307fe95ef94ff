"""What agents retrieve: each run's search budget, counted across workers, and the log of
the records search and context surfaced. `Retrievals` is the contract the stream stages use;
`PostgresRetrievals` keeps it in the source of truth.

Each batch of the log also counts, in the same transaction, the accesses of every agent that
read (`memory_scores`: the access count and last access of the adaptive score): the count
moves exactly when the log's rows are written, so it is the count of the log's rows with an
agent, never off the read path, and never counted twice for rows written once. A read with
no agent (a key bound to none, naming none) has nobody to score for, and counts nothing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import asyncpg


@dataclass(frozen=True)
class RetrievalRow:
    """One record surfaced by search or context (memory_retrieval_log)."""

    namespace: str
    record_id: str
    agent_id: str | None
    run_id: str | None
    # A hash of the query, not the query: the log is for scoring, not for reading back.
    query_hash: str
    route: str
    rank: int
    retrieved_at: datetime


class Retrievals(Protocol):
    async def spend_search(self, namespace: str, run_id: str) -> int:
        """Count one more search made for a run; return how many it has made, this one
        included (every worker counts in the same row)."""

    async def log_retrievals(self, rows: Sequence[RetrievalRow]) -> None:
        """Append to the log, and count each agent's accesses, in one transaction."""


class PostgresRetrievals:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def spend_search(self, namespace: str, run_id: str) -> int:
        searches: int = await self._pool.fetchval(
            """
            INSERT INTO run_search_budgets (namespace, run_id, searches) VALUES ($1, $2, 1)
            ON CONFLICT (namespace, run_id)
            DO UPDATE SET searches = run_search_budgets.searches + 1, last_at = now()
            RETURNING searches
            """,
            namespace, run_id)
        return searches

    async def log_retrievals(self, rows: Sequence[RetrievalRow]) -> None:
        counted = accesses_of(rows)
        async with self._pool.acquire() as connection, connection.transaction():
            await connection.copy_records_to_table(
                "memory_retrieval_log",
                columns=["namespace", "record_id", "agent_id", "run_id", "query_hash",
                         "route", "rank", "retrieved_at"],
                records=[(r.namespace, r.record_id, r.agent_id, r.run_id, r.query_hash,
                          r.route, r.rank, r.retrieved_at) for r in rows])
            if not counted:
                return
            # In key order, as a rating's: two transactions never wait on each other's rows
            # crosswise.
            await connection.execute(
                """
                INSERT INTO memory_scores (namespace, agent_id, memory_id, access_count,
                                           last_access_at)
                SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[],
                                     $5::timestamptz[])
                ORDER BY 1, 2, 3
                ON CONFLICT (namespace, agent_id, memory_id) DO UPDATE SET
                    access_count = memory_scores.access_count + EXCLUDED.access_count,
                    last_access_at = GREATEST(memory_scores.last_access_at,
                                              EXCLUDED.last_access_at),
                    updated_at = now()
                """,
                [a.namespace for a in counted], [a.agent_id for a in counted],
                [a.record_id for a in counted], [a.count for a in counted],
                [a.last_at for a in counted])


@dataclass(frozen=True)
class Accesses:
    """How often one agent was given one record in a batch of the log, and when last."""

    namespace: str
    agent_id: str
    record_id: str
    count: int
    last_at: datetime


def accesses_of(rows: Sequence[RetrievalRow]) -> list[Accesses]:
    """The accesses the rows with an agent count, one per (namespace, agent, record), in
    key order."""
    counted: dict[tuple[str, str, str], tuple[int, datetime]] = {}
    for row in rows:
        if row.agent_id is None:
            continue
        key = (row.namespace, row.agent_id, row.record_id)
        count, last_at = counted.get(key, (0, row.retrieved_at))
        counted[key] = (count + 1, max(last_at, row.retrieved_at))
    return [Accesses(*key, count, last_at) for key, (count, last_at) in sorted(counted.items())]
