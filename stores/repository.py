"""Postgres repository: the source of truth for run ledgers and records.

Every write is idempotent: run events by event_id, records by their deterministic record_id,
so a replayed or re-delivered message changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
import numpy as np
from numpy.typing import NDArray

from schemas.events import Provenance
from schemas.records import Record
from stores.pgvector import register_vector_codec

Vector = NDArray[np.float32]


async def _init_connection(connection: asyncpg.Connection) -> None:
    await register_vector_codec(connection)
    await connection.set_type_codec(
        "jsonb", schema="pg_catalog", encoder=json.dumps, decoder=json.loads, format="text"
    )


async def create_pool(dsn: str, *, min_size: int = 1, max_size: int = 4) -> asyncpg.Pool:
    """A pool whose connections read and write `vector` as numpy arrays and `jsonb` as dicts."""
    pool = await asyncpg.create_pool(
        dsn, min_size=min_size, max_size=max_size, init=_init_connection
    )
    assert pool is not None  # create_pool only returns None when awaited without a loop
    return pool


@dataclass(frozen=True)
class RunEventRow:
    event_id: str
    namespace: str
    run_id: str
    type: str
    occurred_at: datetime
    producer: str
    payload: dict[str, Any]
    provenance: Provenance


_RECORD_COLUMNS = (
    "record_id, namespace, record_kind, scope, agent_id, title, text, body, memory_type, tags,"
    " related_ids, tier, review_state, trust_class, source_ref, run_ref, provenance,"
    " source_event_id, created_at, expires_at, embedding"
)


class Repository:
    """Lookups by lists of ids join on `unnest(ids)`: with `= ANY(ids)` beside a namespace
    filter the planner scanned the whole namespace (6 ms at 100k records, 0.8 ms joined)."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    @classmethod
    async def connect(cls, dsn: str) -> Repository:
        return cls(await create_pool(dsn))

    async def close(self) -> None:
        await self._pool.close()

    async def ping(self) -> None:
        await self._pool.fetchval("SELECT 1")

    # -- run ledger ----------------------------------------------------------------------

    async def append_run_events(self, rows: Sequence[RunEventRow]) -> None:
        await self._pool.executemany(
            """
            INSERT INTO run_events (event_id, namespace, run_id, type, occurred_at, producer,
                                    payload, source_topic, source_partition, source_offset)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
            ON CONFLICT (event_id) DO NOTHING
            """,
            [
                (
                    row.event_id, row.namespace, row.run_id, row.type, row.occurred_at,
                    row.producer, row.payload, row.provenance.source_topic,
                    row.provenance.source_partition, row.provenance.source_offset,
                )
                for row in rows
            ],
        )

    async def started_runs(self, runs: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
        """Which of the (namespace, run_id) pairs have a run.started in the ledger."""
        pairs = list(runs)
        if not pairs:
            return set()
        rows = await self._pool.fetch(
            """
            SELECT DISTINCT namespace, run_id FROM run_events
            JOIN unnest($1::text[], $2::text[]) AS wanted (ns, rid)
              ON namespace = wanted.ns AND run_id = wanted.rid
            WHERE type = 'run.started'
            """,
            [namespace for namespace, _ in pairs],
            [run_id for _, run_id in pairs],
        )
        return {(row["namespace"], row["run_id"]) for row in rows}

    async def run_ledger(self, namespace: str, run_id: str) -> list[dict[str, Any]]:
        """The run's events as envelopes, in the order they occurred."""
        rows = await self._pool.fetch(
            """
            SELECT event_id, type, namespace, occurred_at, producer, payload
            FROM run_events WHERE namespace = $1 AND run_id = $2
            ORDER BY occurred_at, event_id
            """,
            namespace,
            run_id,
        )
        return [dict(row) for row in rows]

    # -- records -------------------------------------------------------------------------

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

    async def insert_records(self, records: Sequence[tuple[Record, Vector]]) -> None:
        """Store new records and their first version in one transaction; existing ones stay."""
        async with self._pool.acquire() as connection, connection.transaction():
            await connection.executemany(
                f"""
                INSERT INTO records ({_RECORD_COLUMNS})
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,
                        $16, $17, $18, $19, $20, $21)
                ON CONFLICT (record_id) DO NOTHING
                """,
                [_record_args(record, vector) for record, vector in records],
            )
            await connection.executemany(
                """
                INSERT INTO record_versions (record_id, version, text, body, event_id)
                VALUES ($1, 1, $2, $3, $4)
                ON CONFLICT (record_id, version) DO NOTHING
                """,
                [
                    (record.record_id, record.text, record.body,
                     record.provenance.source_event_id)
                    for record, _ in records
                ],
            )

    async def mark_announced(self, record_ids: Sequence[str]) -> None:
        await self._pool.execute(
            "UPDATE records SET announced_at = now() FROM unnest($1::text[]) AS wanted (id)"
            " WHERE records.record_id = wanted.id AND announced_at IS NULL",
            list(record_ids),
        )

    async def records_by_id(
        self, namespace: str, record_ids: Sequence[str]
    ) -> dict[str, Mapping[str, Any]]:
        rows = await self._pool.fetch(
            """
            SELECT record_id, record_kind, title, text, source_ref, created_at, related_ids,
                   tags, scope, review_state, trust_class, tier, run_ref
            FROM unnest($2::text[]) AS wanted (id)
            JOIN records ON records.record_id = wanted.id
            WHERE namespace = $1
            """,
            namespace,
            list(record_ids),
        )
        return {row["record_id"]: row for row in rows}

    async def vector_search(
        self,
        vector: Vector,
        *,
        namespace: str,
        limit: int,
        min_score: float,
        record_kinds: Sequence[str] | None = None,
        related_id: str | None = None,
        agent_id: str | None = None,
    ) -> list[tuple[str, float]]:
        """Exact cosine search in Postgres, the fallback when the index is unreachable, with
        the index's rules: live, visible to `agent_id`, not expired."""
        rows = await self._pool.fetch(
            """
            SELECT record_id, 1 - (embedding <=> $2) AS score FROM records
            WHERE namespace = $1 AND superseded_by IS NULL AND review_state <> 'deprecated'
              AND embedding IS NOT NULL
              AND ($3::text[] IS NULL OR record_kind = ANY($3))
              AND ($4::text IS NULL OR $4 = ANY(related_ids))
              AND 1 - (embedding <=> $2) >= $5
              AND (scope = 'shared' OR agent_id = $7)
              AND (expires_at IS NULL OR expires_at > now())
            ORDER BY embedding <=> $2 LIMIT $6
            """,
            namespace, vector, list(record_kinds) if record_kinds else None, related_id,
            min_score, limit, agent_id,
        )
        return [(row["record_id"], float(row["score"])) for row in rows]

    async def record_counts(self, namespace: str) -> dict[str, int]:
        """Live records of the namespace by kind."""
        rows = await self._pool.fetch(
            "SELECT record_kind, count(*) AS n FROM records"
            " WHERE namespace = $1 AND superseded_by IS NULL GROUP BY record_kind",
            namespace,
        )
        return {row["record_kind"]: int(row["n"]) for row in rows}


def _record_args(record: Record, vector: Vector) -> tuple[Any, ...]:
    return (
        record.record_id, record.namespace, record.record_kind, record.scope, record.agent_id,
        record.title, record.text, record.body, record.memory_type, list(record.tags),
        list(record.related_ids), record.tier, record.review_state, record.trust_class,
        record.source_ref, record.run_ref, record.provenance.model_dump(),
        record.provenance.source_event_id, record.created_at, record.expires_at, vector,
    )
