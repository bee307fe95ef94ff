"""The run ledger: every event of every run, appended once by its event id, and each run's
row (task, repo, outcome) kept in step. `Runs` is the contract the stream stage uses;
`PostgresRuns` keeps it in the source of truth."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import asyncpg

from memstream_client.events import Provenance


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
    # Characters intake removed or replaced, per prose field of the payload.
    sanitized: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class LedgerEntry:
    """A run event as the ledger holds it: the fields of its envelope."""

    event_id: str
    type: str
    namespace: str
    occurred_at: datetime
    producer: str
    payload: dict[str, Any]


# A run whose run.finished has not arrived (yet): its status as run listings give it.
UNFINISHED = "unfinished"


@dataclass(frozen=True)
class RunQuery:
    """Which runs of a namespace a listing wants, newest first."""

    limit: int
    # Finished statuses, or UNFINISHED; none: every run.
    statuses: tuple[str, ...] = ()
    # The agent its run.started names.
    agent: str | None = None
    # Runs that started (or, with no run.started, finished) at this time or later.
    since: datetime | None = None


@dataclass(frozen=True)
class RunSummary:
    """A run as listings show it: its row, what its run.started says, and how much the
    ledger holds of it."""

    run_id: str
    # UNFINISHED until its run.finished arrives.
    status: str
    task_key: str | None
    repo: str | None
    agent: str | None
    intent: str | None
    started_at: datetime | None
    finished_at: datetime | None
    event_count: int
    # Distinct error signatures met.
    error_count: int


class Runs(Protocol):
    async def append_run_events(self, rows: Sequence[RunEventRow]) -> None:
        """Append to the ledger and keep each run's row (task, repo, outcome) in step."""

    async def started_runs(self, runs: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
        """Which of the (namespace, run_id) pairs have a run.started in the ledger."""

    async def run_ledger(self, namespace: str, run_id: str) -> list[LedgerEntry]:
        """The run's events in the order they occurred."""

    async def runs(self, namespace: str, query: RunQuery) -> list[RunSummary]:
        """The namespace's runs that `query` wants, newest first (by when they started)."""

    async def run(self, namespace: str, run_id: str) -> RunSummary | None: ...


class PostgresRuns:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def append_run_events(self, rows: Sequence[RunEventRow]) -> None:
        async with self._pool.acquire() as connection, connection.transaction():
            await connection.executemany(
                """
                INSERT INTO run_events (event_id, namespace, run_id, type, occurred_at,
                                        producer, payload, source_topic, source_partition,
                                        source_offset, sanitized)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
                ON CONFLICT (event_id) DO NOTHING
                """,
                [
                    (
                        row.event_id, row.namespace, row.run_id, row.type, row.occurred_at,
                        row.producer, row.payload, row.provenance.source_topic,
                        row.provenance.source_partition, row.provenance.source_offset,
                        row.sanitized,
                    )
                    for row in rows
                ],
            )
            await connection.executemany(
                """
                INSERT INTO runs (namespace, run_id, task_key, repo, started_at)
                VALUES ($1, $2, $3, $4, $5)
                ON CONFLICT (namespace, run_id) DO UPDATE
                SET task_key = EXCLUDED.task_key, repo = EXCLUDED.repo,
                    started_at = EXCLUDED.started_at
                """,
                [
                    (row.namespace, row.run_id, row.payload.get("task_key"),
                     row.payload.get("repo"), row.occurred_at)
                    for row in rows if row.type == "run.started"
                ],
            )
            # The latest run.finished wins, whatever order they are applied in.
            await connection.executemany(
                """
                INSERT INTO runs (namespace, run_id, status, finished_at)
                VALUES ($1, $2, $3, $4)
                ON CONFLICT (namespace, run_id) DO UPDATE
                SET status = EXCLUDED.status, finished_at = EXCLUDED.finished_at
                WHERE runs.finished_at IS NULL OR runs.finished_at <= EXCLUDED.finished_at
                """,
                [
                    (row.namespace, row.run_id, row.payload["status"], row.occurred_at)
                    for row in rows if row.type == "run.finished"
                ],
            )

    async def started_runs(self, runs: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
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

    async def run_ledger(self, namespace: str, run_id: str) -> list[LedgerEntry]:
        rows = await self._pool.fetch(
            """
            SELECT event_id, type, namespace, occurred_at, producer, payload
            FROM run_events WHERE namespace = $1 AND run_id = $2
            ORDER BY occurred_at, event_id
            """,
            namespace,
            run_id,
        )
        return [LedgerEntry(row["event_id"], row["type"], row["namespace"], row["occurred_at"],
                            row["producer"], row["payload"]) for row in rows]

    async def runs(self, namespace: str, query: RunQuery) -> list[RunSummary]:
        finished = [status for status in query.statuses if status != UNFINISHED]
        # Newest first as the index runs_newest orders them (migration 0015). The ledger is
        # read for the listed runs alone, and by the agent filter only when it is asked for.
        rows = await self._pool.fetch(
            f"""
            WITH listed AS (
                SELECT * FROM runs r
                WHERE r.namespace = $1
                  AND (NOT $2 OR r.status = ANY($3::text[]) OR ($4 AND r.status IS NULL))
                  AND ($5::text IS NULL OR EXISTS (
                        SELECT 1 FROM run_events e
                        WHERE e.namespace = r.namespace AND e.run_id = r.run_id
                          AND e.type = 'run.started' AND e.payload->>'agent' = $5))
                  AND ($6::timestamptz IS NULL
                       OR coalesce(r.started_at, r.finished_at) >= $6)
                ORDER BY coalesce(r.started_at, r.finished_at) DESC, r.run_id DESC
                LIMIT $7
            )
            {_SUMMARY_OF_LISTED}
            ORDER BY coalesce(r.started_at, r.finished_at) DESC, r.run_id DESC
            """,
            namespace, bool(query.statuses), finished, UNFINISHED in query.statuses,
            query.agent, query.since, query.limit,
        )
        return [_summary(row) for row in rows]

    async def run(self, namespace: str, run_id: str) -> RunSummary | None:
        row = await self._pool.fetchrow(
            f"""
            WITH listed AS (SELECT * FROM runs WHERE namespace = $1 AND run_id = $2)
            {_SUMMARY_OF_LISTED}
            """,
            namespace, run_id,
        )
        return None if row is None else _summary(row)


# What a listing shows of each run of `listed` (rows of `runs`).
_SUMMARY_OF_LISTED = """
SELECT r.run_id, r.status, r.task_key, r.repo, r.started_at, r.finished_at,
       started.payload->>'agent' AS agent, started.payload->>'intent' AS intent,
       (SELECT count(*) FROM run_events e
        WHERE e.namespace = r.namespace AND e.run_id = r.run_id) AS event_count,
       (SELECT count(DISTINCT o.signature_id) FROM error_occurrences o
        WHERE o.namespace = r.namespace AND o.run_id = r.run_id) AS error_count
FROM listed r
LEFT JOIN LATERAL (
    SELECT payload FROM run_events e
    WHERE e.namespace = r.namespace AND e.run_id = r.run_id AND e.type = 'run.started'
    ORDER BY e.occurred_at, e.event_id LIMIT 1
) started ON true
"""


def _summary(row: Mapping[str, Any]) -> RunSummary:
    return RunSummary(
        run_id=row["run_id"], status=row["status"] or UNFINISHED, task_key=row["task_key"],
        repo=row["repo"], agent=row["agent"] or None, intent=row["intent"] or None,
        started_at=row["started_at"], finished_at=row["finished_at"],
        event_count=int(row["event_count"]), error_count=int(row["error_count"]),
    )
