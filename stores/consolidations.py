"""Consolidations: what the trigger counts of a namespace, the requests it claims once per
basis, the memories a consolidation plans from, and the maintenance reports it writes in one
transaction with its merges, then publishes under a lease. `Consolidations` is the contract
the stream stages use; `PostgresConsolidations` keeps it in the source of truth."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

import asyncpg

from processors.memory.lifecycle import version_fields
from processors.text.embedding import Vector
from schemas.records import Record
from stores.postgres.rows import (
    INSERT_VERSION,
    LIVE_MEMORY,
    RECORD_COLUMNS,
    insert_new_records,
    record_of,
)


@dataclass(frozen=True)
class ConsolidationFacts:
    reports_today: int
    # Live memories stored since the last report (all of them when there is none).
    new_since_report: int
    last_report_id: str | None


@dataclass(frozen=True)
class CountWindow:
    window_start: datetime
    memories: int


@dataclass(frozen=True)
class CountedRequest:
    """A consolidation request the trigger claimed; `sent_at` is None until it is sent."""

    request_id: str
    basis: str
    new_memories: int
    claimed_at: datetime
    sent_at: datetime | None


@dataclass(frozen=True)
class ConsolidationCounts:
    # Newest first.
    windows: list[CountWindow]
    last_request: CountedRequest | None


@dataclass(frozen=True)
class NewReport:
    """A consolidation's report as it is written, with its merges."""

    report_id: str
    namespace: str
    reason: str
    started_at: datetime
    memories: int
    clusters: list[dict[str, Any]]
    merged_ids: list[str]
    new_ids: list[str]
    timings: dict[str, float]


@dataclass(frozen=True)
class MaintenanceReport:
    report_id: str
    namespace: str
    reason: str
    started_at: datetime
    finished_at: datetime
    memories: int
    clusters: list[dict[str, Any]]
    merged_ids: list[str]
    new_ids: list[str]
    # Seconds by phase.
    timings: dict[str, float]
    # When its replacements were searchable and announced; None until then.
    announced_at: datetime | None


@dataclass(frozen=True)
class ReportLease:
    """A consolidation report to index and announce, held by one worker for a while."""

    report_id: str
    namespace: str
    new_ids: tuple[str, ...]
    merged_ids: tuple[str, ...]
    # When an earlier try began publishing it: announcements may exist from then on.
    tried_since: datetime | None


class Consolidations(Protocol):
    async def facts(self, namespace: str) -> ConsolidationFacts:
        """What the short-circuit rules ask of a namespace."""

    async def counts(self, namespace: str) -> ConsolidationCounts:
        """The namespace's windows of new memories and its latest counted request."""

    async def claim_request(self, namespace: str, basis: str, request_id: str,
                            new_memories: int) -> bool:
        """Claim the namespace's one request of this basis; True when it is to be sent (just
        claimed, or claimed before and never sent)."""

    async def mark_request_sent(self, namespace: str, basis: str) -> None: ...

    async def live_memories(self, namespace: str) -> list[tuple[Record, Vector | None]]:
        """The namespace's memories that search can return (not superseded, not deprecated,
        not expired), with their stored vectors; ordered by id, so a plan does not depend on
        the order Postgres happens to return rows in."""

    async def rejected_merges(self, namespace: str) -> set[str]:
        """The merges a reviewer rejected: the same members are not proposed again."""

    async def apply(self, report: NewReport, merges: Sequence[tuple[Record, Vector]],
                    superseded: Mapping[str, str]) -> dict[str, int] | None:
        """Carry out a consolidation in one transaction: store the replacements (and their
        first version), point every superseded record at its replacement as a new version
        of it, and write the report. Returns the superseded records' new versions; None when
        the report already exists (the request was carried out before: nothing changes)."""

    async def report(self, report_id: str) -> MaintenanceReport | None: ...

    async def reports(self, namespace: str, limit: int) -> list[MaintenanceReport]:
        """The namespace's reports, newest first."""

    async def add_report_timings(self, report_id: str, timings: Mapping[str, float]) -> None:
        """Add the seconds of phases that ended after the report was written."""

    async def unannounced_reports(self, limit: int) -> list[str]:
        """Reports whose replacements are not indexed and announced yet, oldest first."""

    async def lease_report(self, report_id: str, lease: timedelta) -> ReportLease | None:
        """Take the publication of an unannounced report for `lease`; None when it is
        announced or another worker's lease runs."""

    async def mark_report_announced(self, report_id: str, timings: Mapping[str, float]) -> None:
        """The report is done: its replacements are searchable and announced. `timings`
        adds the seconds of those last steps."""


class PostgresConsolidations:
    def __init__(self, pool: asyncpg.Pool, *, keep_windows_for: timedelta) -> None:
        self._pool = pool
        self._keep_windows_for = keep_windows_for

    async def facts(self, namespace: str) -> ConsolidationFacts:
        row = await self._pool.fetchrow(
            """
            WITH last AS (
                SELECT report_id, finished_at FROM maintenance_reports WHERE namespace = $1
                ORDER BY finished_at DESC, report_id LIMIT 1)
            SELECT
                (SELECT count(*) FROM maintenance_reports WHERE namespace = $1
                   AND finished_at >= date_trunc('day', now() AT TIME ZONE 'UTC')
                                      AT TIME ZONE 'UTC') AS today,
                (SELECT count(*) FROM records WHERE namespace = $1 AND record_kind = 'memory'
                   AND superseded_by IS NULL
                   AND stored_at > coalesce((SELECT finished_at FROM last), '-infinity'))
                   AS new,
                (SELECT report_id FROM last) AS last_report_id
            """,
            namespace,
        )
        assert row is not None  # a SELECT without FROM returns one row
        return ConsolidationFacts(int(row["today"]), int(row["new"]), row["last_report_id"])

    async def counts(self, namespace: str) -> ConsolidationCounts:
        async with self._pool.acquire() as connection:
            windows = await connection.fetch(
                "SELECT window_start, memories FROM memory_window_counts"
                " WHERE namespace = $1 AND window_start >= now() - $2::interval"
                " ORDER BY window_start DESC",
                namespace, self._keep_windows_for,
            )
            request = await connection.fetchrow(
                "SELECT request_id, basis, new_memories, claimed_at, sent_at"
                " FROM consolidation_requests WHERE namespace = $1"
                " ORDER BY claimed_at DESC LIMIT 1",
                namespace,
            )
        return ConsolidationCounts(
            [CountWindow(row["window_start"], int(row["memories"])) for row in windows],
            None if request is None else CountedRequest(
                request["request_id"], request["basis"], int(request["new_memories"]),
                request["claimed_at"], request["sent_at"]))

    async def claim_request(self, namespace: str, basis: str, request_id: str,
                            new_memories: int) -> bool:
        row = await self._pool.fetchrow(
            """
            INSERT INTO consolidation_requests (namespace, basis, request_id, new_memories)
            VALUES ($1, $2, $3, $4)
            ON CONFLICT (namespace, basis) DO UPDATE SET namespace = excluded.namespace
            RETURNING sent_at
            """,
            namespace, basis, request_id, new_memories,
        )
        assert row is not None  # an upsert with RETURNING always returns its row
        return row["sent_at"] is None

    async def mark_request_sent(self, namespace: str, basis: str) -> None:
        await self._pool.execute(
            "UPDATE consolidation_requests SET sent_at = now()"
            " WHERE namespace = $1 AND basis = $2 AND sent_at IS NULL",
            namespace, basis,
        )

    async def live_memories(self, namespace: str) -> list[tuple[Record, Vector | None]]:
        rows = await self._pool.fetch(
            f"""
            SELECT {RECORD_COLUMNS} FROM records
            WHERE namespace = $1 AND {LIVE_MEMORY}
            ORDER BY record_id
            """,
            namespace,
        )
        return [(record_of(row), row["embedding"]) for row in rows]

    async def rejected_merges(self, namespace: str) -> set[str]:
        rows = await self._pool.fetch(
            "SELECT record_id FROM records WHERE namespace = $1 AND record_kind = 'memory'"
            " AND review_state = 'deprecated' AND body ? 'merged_from'",
            namespace,
        )
        return {row["record_id"] for row in rows}

    async def apply(self, report: NewReport, merges: Sequence[tuple[Record, Vector]],
                    superseded: Mapping[str, str]) -> dict[str, int] | None:
        async with self._pool.acquire() as connection, connection.transaction():
            inserted = await connection.fetchval(
                """
                INSERT INTO maintenance_reports (report_id, namespace, reason, started_at,
                    memories, clusters, merged_ids, new_ids, timings)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                ON CONFLICT (report_id) DO NOTHING RETURNING report_id
                """,
                report.report_id, report.namespace, report.reason, report.started_at,
                report.memories, report.clusters, list(report.merged_ids),
                list(report.new_ids), report.timings,
            )
            if inserted is None:
                return None
            await insert_new_records(connection, merges)
            rows = await connection.fetch(
                """
                UPDATE records SET superseded_by = wanted.by, version = version + 1,
                       updated_at = now()
                FROM unnest($1::text[], $2::text[]) AS wanted (id, by)
                WHERE records.record_id = wanted.id AND records.namespace = $3
                  AND records.superseded_by IS NULL
                RETURNING records.*
                """,
                list(superseded), list(superseded.values()), report.namespace,
            )
            await connection.executemany(
                INSERT_VERSION,
                [(row["record_id"], row["version"], row["text"],
                  {**row["body"], "superseded_by": row["superseded_by"]}, report.report_id,
                  version_fields(record_of(row)), "superseded", "consolidation",
                  report.namespace)
                 for row in rows],
            )
            return {row["record_id"]: int(row["version"]) for row in rows}

    async def report(self, report_id: str) -> MaintenanceReport | None:
        row = await self._pool.fetchrow(
            f"SELECT {_REPORT_COLUMNS} FROM maintenance_reports WHERE report_id = $1", report_id
        )
        return None if row is None else _report_of(row)

    async def reports(self, namespace: str, limit: int) -> list[MaintenanceReport]:
        rows = await self._pool.fetch(
            f"SELECT {_REPORT_COLUMNS} FROM maintenance_reports WHERE namespace = $1"
            " ORDER BY finished_at DESC, report_id LIMIT $2",
            namespace, limit,
        )
        return [_report_of(row) for row in rows]

    async def add_report_timings(self, report_id: str, timings: Mapping[str, float]) -> None:
        await self._pool.execute(
            "UPDATE maintenance_reports SET timings = timings || $2 WHERE report_id = $1",
            report_id, dict(timings),
        )

    async def unannounced_reports(self, limit: int) -> list[str]:
        rows = await self._pool.fetch(
            "SELECT report_id FROM maintenance_reports WHERE announced_at IS NULL"
            " ORDER BY finished_at LIMIT $1",
            limit,
        )
        return [row["report_id"] for row in rows]

    async def lease_report(self, report_id: str, lease: timedelta) -> ReportLease | None:
        row = await self._pool.fetchrow(
            """
            UPDATE maintenance_reports
            SET lease_until = now() + $2::interval,
                publish_started_at = coalesce(publish_started_at, now())
            WHERE report_id = $1 AND announced_at IS NULL
              AND (lease_until IS NULL OR lease_until < now())
            RETURNING namespace, new_ids, merged_ids, publish_started_at,
                      publish_started_at < now() AS tried_before
            """,
            report_id, lease,
        )
        if row is None:
            return None
        return ReportLease(report_id, row["namespace"], tuple(row["new_ids"]),
                           tuple(row["merged_ids"]),
                           row["publish_started_at"] if row["tried_before"] else None)

    async def mark_report_announced(self, report_id: str, timings: Mapping[str, float]) -> None:
        await self._pool.execute(
            "UPDATE maintenance_reports SET announced_at = now(), timings = timings || $2"
            " WHERE report_id = $1",
            report_id, dict(timings),
        )


_REPORT_COLUMNS = (
    "report_id, namespace, reason, started_at, finished_at, memories, clusters, merged_ids,"
    " new_ids, timings, announced_at"
)


def _report_of(row: Mapping[str, Any]) -> MaintenanceReport:
    return MaintenanceReport(
        report_id=row["report_id"], namespace=row["namespace"], reason=row["reason"],
        started_at=row["started_at"], finished_at=row["finished_at"],
        memories=int(row["memories"]), clusters=row["clusters"],
        merged_ids=list(row["merged_ids"]), new_ids=list(row["new_ids"]),
        timings=row["timings"], announced_at=row["announced_at"])
