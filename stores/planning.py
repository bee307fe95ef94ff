"""A repository's planning as memstream keeps it: each work item as last read from the
repository's issues.jsonl, and the write-backs runs asked for (claims, closes, follow-ups)
until a sync writes them into the file. `Planning` is the contract the stage and the routes
use; `PostgresPlanning` keeps it in the source of truth."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

import asyncpg

WriteBackState = Literal["pending", "applied", "failed"]


@dataclass(frozen=True)
class PlanningItemRow:
    namespace: str
    repo: str
    item_id: str
    fields: dict[str, Any]
    content_hash: str
    read_at: datetime
    event_id: str


@dataclass(frozen=True)
class WriteBack:
    """A claim, close (or release) or follow-up of a run, as its planning event said."""

    event_id: str
    namespace: str
    repo: str
    item_id: str
    type: str
    occurred_at: datetime
    payload: dict[str, Any]


class Planning(Protocol):
    async def upsert_items(self, rows: Sequence[PlanningItemRow]) -> None:
        """Keep each item as read; a row whose content is unchanged, or read later than
        this one, is left as it is."""

    async def items(self, namespace: str, repo: str) -> list[PlanningItemRow]:
        """The repo's items as last read, by id."""

    async def append_write_backs(self, rows: Sequence[WriteBack]) -> None:
        """Queue write-backs; one already there (same event id) is left as it is."""

    async def pending(self, namespace: str, repo: str) -> list[WriteBack]:
        """The repo's write-backs not written yet, in the order they were queued."""

    async def settle(self, event_ids: Iterable[str], state: WriteBackState, at: datetime,
                     detail: str | None = None) -> None:
        """Mark write-backs applied (written into the file) or failed (with why)."""

    async def pending_repos(self) -> list[tuple[str, str]]:
        """Every (namespace, repo) with write-backs pending."""


class PostgresPlanning:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def upsert_items(self, rows: Sequence[PlanningItemRow]) -> None:
        await self._pool.executemany(
            """
            INSERT INTO planning_items (namespace, repo, item_id, fields, content_hash,
                                        read_at, event_id)
            VALUES ($1, $2, $3, $4, $5, $6, $7)
            ON CONFLICT (namespace, repo, item_id) DO UPDATE
            SET fields = EXCLUDED.fields, content_hash = EXCLUDED.content_hash,
                read_at = EXCLUDED.read_at, event_id = EXCLUDED.event_id
            WHERE planning_items.content_hash <> EXCLUDED.content_hash
              AND planning_items.read_at <= EXCLUDED.read_at
            """,
            [(row.namespace, row.repo, row.item_id, row.fields, row.content_hash,
              row.read_at, row.event_id) for row in rows])

    async def items(self, namespace: str, repo: str) -> list[PlanningItemRow]:
        rows = await self._pool.fetch(
            """
            SELECT namespace, repo, item_id, fields, content_hash, read_at, event_id
            FROM planning_items WHERE namespace = $1 AND repo = $2 ORDER BY item_id
            """, namespace, repo)
        return [PlanningItemRow(row["namespace"], row["repo"], row["item_id"], row["fields"],
                                row["content_hash"], row["read_at"], row["event_id"])
                for row in rows]

    async def append_write_backs(self, rows: Sequence[WriteBack]) -> None:
        await self._pool.executemany(
            """
            INSERT INTO planning_writebacks (event_id, namespace, repo, item_id, type,
                                             occurred_at, payload)
            VALUES ($1, $2, $3, $4, $5, $6, $7)
            ON CONFLICT (event_id) DO NOTHING
            """,
            [(row.event_id, row.namespace, row.repo, row.item_id, row.type, row.occurred_at,
              row.payload) for row in rows])

    async def pending(self, namespace: str, repo: str) -> list[WriteBack]:
        rows = await self._pool.fetch(
            """
            SELECT event_id, namespace, repo, item_id, type, occurred_at, payload
            FROM planning_writebacks
            WHERE namespace = $1 AND repo = $2 AND state = 'pending' ORDER BY seq
            """, namespace, repo)
        return [WriteBack(row["event_id"], row["namespace"], row["repo"], row["item_id"],
                          row["type"], row["occurred_at"], row["payload"]) for row in rows]

    async def settle(self, event_ids: Iterable[str], state: WriteBackState, at: datetime,
                     detail: str | None = None) -> None:
        await self._pool.execute(
            """
            UPDATE planning_writebacks SET state = $2, settled_at = $3, detail = $4
            WHERE event_id = ANY($1::text[]) AND state = 'pending'
            """, list(event_ids), state, at, detail)

    async def pending_repos(self) -> list[tuple[str, str]]:
        rows = await self._pool.fetch(
            "SELECT DISTINCT namespace, repo FROM planning_writebacks WHERE state = 'pending'")
        return [(row["namespace"], row["repo"]) for row in rows]
