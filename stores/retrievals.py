"""What agents retrieve: each run's search budget, counted across workers, and the log of
the records search and context surfaced. `Retrievals` is the contract the stream stages use;
`PostgresRetrievals` keeps it in the source of truth."""

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

    async def log_retrievals(self, rows: Sequence[RetrievalRow]) -> None: ...


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
        await self._pool.copy_records_to_table(
            "memory_retrieval_log",
            columns=["namespace", "record_id", "agent_id", "run_id", "query_hash", "route",
                     "rank", "retrieved_at"],
            records=[(r.namespace, r.record_id, r.agent_id, r.run_id, r.query_hash, r.route,
                      r.rank, r.retrieved_at) for r in rows])
