"""Postgres repository: the source of truth for run ledgers and records.

Every write is idempotent: run events by event_id, records by their deterministic record_id,
so a replayed or re-delivered message changes nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import numpy as np
from numpy.typing import NDArray

from processors.consolidation_trigger import TriggerRules
from processors.fix_patterns import ErrorOccurrence, RunFacts
from processors.lexical import record_vector
from processors.lifecycle import version_fields
from processors.signatures import ErrorSignature
from schemas.events import Provenance
from schemas.records import Record
from stores.pgvector import register_codecs

Vector = NDArray[np.float32]


async def create_pool(dsn: str, *, min_size: int = 1, max_size: int = 4) -> asyncpg.Pool:
    """A pool whose connections read and write `vector` as numpy arrays and `jsonb` as dicts."""
    pool = await asyncpg.create_pool(
        dsn, min_size=min_size, max_size=max_size, init=register_codecs
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
    # Characters intake removed or replaced, per prose field of the payload.
    sanitized: dict[str, int] = field(default_factory=dict)


_RECORD_COLUMNS = (
    "record_id, namespace, record_kind, scope, agent_id, title, text, body, memory_type, tags,"
    " related_ids, tier, review_state, trust_class, source_ref, run_ref, provenance,"
    " source_event_id, created_at, expires_at, embedding, thread, lexical, lexical_terms"
)
_INSERT_RECORD = (
    f"INSERT INTO records ({_RECORD_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10,"
    " $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24)"
)
_INSERT_VERSION = (
    "INSERT INTO record_versions (record_id, version, text, body, event_id, fields, change,"
    " actor) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
)


@dataclass(frozen=True)
class ConsolidationFacts:
    reports_today: int
    # Live memories stored since the last report (all of them when there is none).
    new_since_report: int
    last_report_id: str | None


@dataclass(frozen=True)
class StoredRecord:
    record: Record
    vector: Vector | None
    version: int
    superseded_by: str | None


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


@dataclass(frozen=True)
class ReportLease:
    """A consolidation report to index and announce, held by one worker for a while."""

    report_id: str
    namespace: str
    new_ids: tuple[str, ...]
    merged_ids: tuple[str, ...]
    # When an earlier try began publishing it: announcements may exist from then on.
    tried_since: datetime | None


@dataclass(frozen=True)
class SavedVersion:
    """A record version saved (or found saved and not yet announced) and its vector."""

    version: int
    vector: Vector
    # When an earlier try saved it: it may have been announced since.
    stored_before: datetime | None = None


DEFAULT_COUNT_WINDOW = TriggerRules().window
DEFAULT_KEEP_WINDOWS = TriggerRules().keep_windows_for


class Repository:
    """Lookups by lists of ids join on `unnest(ids)`: with `= ANY(ids)` beside a namespace
    filter the planner scanned the whole namespace (6 ms at 100k records, 0.8 ms joined)."""

    def __init__(self, pool: asyncpg.Pool, *, count_window: timedelta = DEFAULT_COUNT_WINDOW,
                 keep_windows_for: timedelta = DEFAULT_KEEP_WINDOWS) -> None:
        self._pool = pool
        self._count_window = count_window
        self._keep_windows_for = keep_windows_for

    @classmethod
    async def connect(cls, dsn: str, *, count_window: timedelta = DEFAULT_COUNT_WINDOW,
                      keep_windows_for: timedelta = DEFAULT_KEEP_WINDOWS) -> Repository:
        return cls(await create_pool(dsn), count_window=count_window,
                   keep_windows_for=keep_windows_for)

    async def close(self) -> None:
        await self._pool.close()

    async def ping(self) -> None:
        await self._pool.fetchval("SELECT 1")

    # -- run ledger ----------------------------------------------------------------------

    async def append_run_events(self, rows: Sequence[RunEventRow]) -> None:
        """Append to the ledger and keep each run's row (task, repo, outcome) in step."""
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

    async def append_error_occurrences(self, occurrences: Sequence[ErrorOccurrence]) -> None:
        await self._pool.executemany(
            """
            INSERT INTO error_occurrences (event_id, namespace, run_id, signature_id, origin,
                                           occurred_at, dialect, exception_type, template,
                                           frames, message, provenance)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
            ON CONFLICT (event_id) DO NOTHING
            """,
            [
                (
                    o.event_id, o.namespace, o.run_id, o.signature.signature_id, o.origin,
                    o.occurred_at, o.signature.dialect, o.signature.exception_type,
                    o.signature.template, list(o.signature.frames), o.message,
                    o.provenance.model_dump(),
                )
                for o in occurrences
            ],
        )

    async def signatures_fixable_by(
        self, runs: Iterable[tuple[str, str]], window: timedelta
    ) -> set[tuple[str, str]]:
        """The (namespace, signature_id) pairs that these runs, if they succeeded, may have
        fixed: met before they finished in the same run, a run of the same task_key, or one
        without a task_key in the same repo within `window`. A superset; the fix rules of
        processors.fix_patterns decide."""
        pairs = list(runs)
        if not pairs:
            return set()
        rows = await self._pool.fetch(
            """
            SELECT DISTINCT o.namespace, o.signature_id
            FROM unnest($1::text[], $2::text[]) AS wanted (ns, rid)
            JOIN runs g ON g.namespace = wanted.ns AND g.run_id = wanted.rid
                       AND g.status = 'succeeded'
            JOIN runs f ON f.namespace = g.namespace AND (
                    f.run_id = g.run_id
                 OR (f.task_key IS NOT NULL AND f.task_key = g.task_key)
                 OR (f.task_key IS NULL AND f.repo IS NOT NULL AND f.repo = g.repo))
            JOIN error_occurrences o ON o.namespace = f.namespace AND o.run_id = f.run_id
            WHERE o.occurred_at < g.finished_at
              AND (f.task_key IS NOT NULL OR f.run_id = g.run_id
                   OR o.occurred_at >= g.finished_at - $3::interval)
            """,
            [namespace for namespace, _ in pairs],
            [run_id for _, run_id in pairs],
            window,
        )
        return {(row["namespace"], row["signature_id"]) for row in rows}

    @asynccontextmanager
    async def fix_pattern_session(
        self, namespace: str, signature_id: str
    ) -> AsyncIterator[FixPatternSession]:
        """One transaction holding the signature's lock: workers that rebuild the same fix
        pattern at once take turns, so the last write is built from all committed facts."""
        async with self._pool.acquire() as connection, connection.transaction():
            await connection.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                f"fix_pattern\x1f{namespace}\x1f{signature_id}",
            )
            yield FixPatternSession(connection, namespace, signature_id)

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

    async def run_signatures(self, namespace: str, run_id: str) -> list[str]:
        """The error signatures a run met, the latest first."""
        rows = await self._pool.fetch(
            "SELECT signature_id, max(occurred_at) AS last FROM error_occurrences"
            " WHERE namespace = $1 AND run_id = $2 GROUP BY signature_id ORDER BY last DESC",
            namespace, run_id)
        return [row["signature_id"] for row in rows]

    async def spend_search(self, namespace: str, run_id: str) -> int:
        """Count one more search made for a run; return how many it has made, this one
        included (every worker counts in the same row)."""
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

    async def last_in_threads(self, namespace: str, threads: Iterable[str]) -> dict[str, Record]:
        """The latest memory stored in each of these threads of the namespace (in the order
        the writes were consumed)."""
        rows = await self._pool.fetch(
            f"""
            SELECT DISTINCT ON (thread) {_RECORD_COLUMNS} FROM records
            WHERE namespace = $1 AND thread = ANY($2::text[]) AND record_kind = 'memory'
            ORDER BY thread, stored_at DESC,
                     (provenance->>'source_partition')::int DESC,
                     (provenance->>'source_offset')::bigint DESC
            """,
            namespace, sorted(set(threads)),
        )
        return {row["thread"]: record_of(row) for row in rows}

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

    async def insert_records(
        self, records: Sequence[tuple[Record, Vector]]
    ) -> dict[str, datetime]:
        """Store new records and their first version in one transaction; existing ones stay,
        and are returned with the time they were stored. The new memories among them are
        counted in their namespace's current window."""
        async with self._pool.acquire() as connection, connection.transaction():
            await _insert_new_records(connection, records)
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

    # -- refused writes --------------------------------------------------------------------

    async def insert_refused_writes(
        self, refused: Sequence[tuple[Record, str]]
    ) -> dict[str, datetime]:
        """Record writes refused with their reason (record, reason); those recorded before
        stay, and are returned with the time they were refused."""
        async with self._pool.acquire() as connection, connection.transaction():
            await connection.executemany(
                """
                INSERT INTO refused_writes (record_id, event_id, namespace, reason, producer,
                                            source_topic, source_partition, source_offset)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (record_id) DO NOTHING
                """,
                [(record.record_id, record.provenance.source_event_id, record.namespace,
                  reason, record.provenance.producer, record.provenance.source_topic,
                  record.provenance.source_partition, record.provenance.source_offset)
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

    async def records_by_id(
        self, namespace: str, record_ids: Sequence[str]
    ) -> dict[str, Mapping[str, Any]]:
        rows = await self._pool.fetch(
            """
            SELECT record_id, record_kind, title, text, body, source_ref, created_at,
                   related_ids, tags, scope, agent_id, review_state, trust_class, tier,
                   run_ref, version, memory_type, thread, provenance, expires_at, embedding
            FROM unnest($2::text[]) AS wanted (id)
            JOIN records ON records.record_id = wanted.id
            WHERE namespace = $1
            """,
            namespace,
            list(record_ids),
        )
        return {row["record_id"]: row for row in rows}

    async def record_counts(self, namespace: str) -> dict[str, int]:
        """Live records of the namespace by kind."""
        rows = await self._pool.fetch(
            "SELECT record_kind, count(*) AS n FROM records"
            " WHERE namespace = $1 AND superseded_by IS NULL GROUP BY record_kind",
            namespace,
        )
        return {row["record_kind"]: int(row["n"]) for row in rows}


    # -- consolidation -------------------------------------------------------------------

    async def live_memories(self, namespace: str) -> list[tuple[Record, Vector | None]]:
        """The namespace's memories that search can return (not superseded, not deprecated,
        not expired), with their stored vectors; ordered by id, so a plan does not depend on
        the order Postgres happens to return rows in."""
        rows = await self._pool.fetch(
            f"""
            SELECT {_RECORD_COLUMNS} FROM records
            WHERE namespace = $1 AND record_kind = 'memory' AND superseded_by IS NULL
              AND review_state <> 'deprecated' AND (expires_at IS NULL OR expires_at > now())
            ORDER BY record_id
            """,
            namespace,
        )
        return [(record_of(row), row["embedding"]) for row in rows]

    async def rejected_merges(self, namespace: str) -> set[str]:
        """The merges a reviewer rejected: the same members are not proposed again."""
        rows = await self._pool.fetch(
            "SELECT record_id FROM records WHERE namespace = $1 AND record_kind = 'memory'"
            " AND review_state = 'deprecated' AND body ? 'merged_from'",
            namespace,
        )
        return {row["record_id"] for row in rows}

    async def stored_records(self, namespace: str,
                             record_ids: Sequence[str]) -> list[StoredRecord]:
        """The records with these ids in the namespace, as stored now, in id order."""
        rows = await self._pool.fetch(
            f"""
            SELECT {_RECORD_COLUMNS}, version, superseded_by
            FROM unnest($2::text[]) AS wanted (id)
            JOIN records ON records.record_id = wanted.id
            WHERE namespace = $1 ORDER BY record_id
            """,
            namespace, list(record_ids),
        )
        return [StoredRecord(record_of(row), row["embedding"], int(row["version"]),
                             row["superseded_by"]) for row in rows]

    async def store_vectors(self, vectors: Sequence[tuple[str, Vector]]) -> None:
        """Keep vectors computed again for records that had none."""
        await self._pool.executemany(
            "UPDATE records SET embedding = $2 WHERE record_id = $1", list(vectors)
        )

    async def consolidation_facts(self, namespace: str) -> ConsolidationFacts:
        """What the short-circuit rules ask of a namespace."""
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

    async def claim_consolidation_request(
        self, namespace: str, basis: str, request_id: str, new_memories: int
    ) -> bool:
        """Claim the namespace's one request of this basis; True when it is to be sent (just
        claimed, or claimed before and never sent)."""
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

    async def consolidation_counts(self, namespace: str) -> dict[str, Any]:
        """The namespace's windows of new memories (newest first), the facts the rules ask,
        and its latest counted request."""
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
        return {"windows": [dict(window) for window in windows],
                "last_request": None if request is None else dict(request)}

    async def maintenance_report(self, report_id: str) -> dict[str, Any] | None:
        row = await self._pool.fetchrow(
            f"SELECT {_REPORT_COLUMNS} FROM maintenance_reports WHERE report_id = $1", report_id
        )
        return None if row is None else dict(row)

    async def maintenance_reports(self, namespace: str, limit: int) -> list[dict[str, Any]]:
        """The namespace's reports, newest first."""
        rows = await self._pool.fetch(
            f"SELECT {_REPORT_COLUMNS} FROM maintenance_reports WHERE namespace = $1"
            " ORDER BY finished_at DESC, report_id LIMIT $2",
            namespace, limit,
        )
        return [dict(row) for row in rows]

    async def apply_consolidation(
        self, report: Mapping[str, Any], merges: Sequence[tuple[Record, Vector]],
        superseded: Mapping[str, str],
    ) -> dict[str, int] | None:
        """Carry out a consolidation in one transaction: store the replacements (and their
        first version), point every superseded record at its replacement as a new version
        of it, and write the report. Returns the superseded records' new versions; None when
        the report already exists (the request was carried out before: nothing changes)."""
        async with self._pool.acquire() as connection, connection.transaction():
            inserted = await connection.fetchval(
                """
                INSERT INTO maintenance_reports (report_id, namespace, reason, started_at,
                    memories, clusters, merged_ids, new_ids, timings)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                ON CONFLICT (report_id) DO NOTHING RETURNING report_id
                """,
                report["report_id"], report["namespace"], report["reason"],
                report["started_at"], report["memories"], report["clusters"],
                list(report["merged_ids"]), list(report["new_ids"]), report["timings"],
            )
            if inserted is None:
                return None
            await _insert_new_records(connection, merges)
            rows = await connection.fetch(
                """
                UPDATE records SET superseded_by = wanted.by, version = version + 1,
                       updated_at = now()
                FROM unnest($1::text[], $2::text[]) AS wanted (id, by)
                WHERE records.record_id = wanted.id AND records.namespace = $3
                  AND records.superseded_by IS NULL
                RETURNING records.*
                """,
                list(superseded), list(superseded.values()), report["namespace"],
            )
            await connection.executemany(
                _INSERT_VERSION,
                [(row["record_id"], row["version"], row["text"],
                  {**row["body"], "superseded_by": row["superseded_by"]}, report["report_id"],
                  version_fields(record_of(row)), "superseded", "consolidation")
                 for row in rows],
            )
            return {row["record_id"]: int(row["version"]) for row in rows}

    async def unannounced_reports(self, limit: int) -> list[str]:
        """Reports whose replacements are not indexed and announced yet, oldest first."""
        rows = await self._pool.fetch(
            "SELECT report_id FROM maintenance_reports WHERE announced_at IS NULL"
            " ORDER BY finished_at LIMIT $1",
            limit,
        )
        return [row["report_id"] for row in rows]

    async def lease_report(self, report_id: str, lease: timedelta) -> ReportLease | None:
        """Take the publication of an unannounced report for `lease`; None when it is
        announced or another worker's lease runs."""
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

    async def add_report_timings(self, report_id: str, timings: Mapping[str, float]) -> None:
        """Add the seconds of phases that ended after the report was written."""
        await self._pool.execute(
            "UPDATE maintenance_reports SET timings = timings || $2 WHERE report_id = $1",
            report_id, dict(timings),
        )

    async def mark_report_announced(self, report_id: str, timings: Mapping[str, float]) -> None:
        """The report is done: its replacements are searchable and announced. `timings`
        adds the seconds of those last steps."""
        await self._pool.execute(
            "UPDATE maintenance_reports SET announced_at = now(), timings = timings || $2"
            " WHERE report_id = $1",
            report_id, dict(timings),
        )

    async def record_lineage(self, namespace: str, record_id: str) -> dict[str, Any] | None:
        """A record, its version history and the records it superseded (a replacement's
        members stay stored, hidden from search and reachable from here)."""
        async with self._pool.acquire() as connection:
            row = await connection.fetchrow(
                f"SELECT {_RECORD_COLUMNS}, version, superseded_by FROM records"
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
        return {
            "record": record_of(row).model_dump(mode="json"),
            "version": int(row["version"]),
            "superseded_by": row["superseded_by"],
            "versions": [dict(version) for version in versions],
            "supersedes": [dict(member) for member in superseded],
        }


class FixPatternSession:
    """Reads the facts of one fix pattern and saves its new version, inside the lock."""

    def __init__(self, connection: asyncpg.Connection, namespace: str, signature_id: str):
        self._connection = connection
        self._namespace = namespace
        self._signature_id = signature_id

    async def occurrences(self) -> list[ErrorOccurrence]:
        rows = await self._connection.fetch(
            """
            SELECT * FROM error_occurrences WHERE namespace = $1 AND signature_id = $2
            ORDER BY occurred_at, event_id
            """,
            self._namespace, self._signature_id,
        )
        return [
            ErrorOccurrence(
                event_id=row["event_id"], namespace=row["namespace"], run_id=row["run_id"],
                origin=row["origin"], occurred_at=row["occurred_at"],
                signature=ErrorSignature(
                    signature_id=row["signature_id"], dialect=row["dialect"],
                    exception_type=row["exception_type"], template=row["template"],
                    frames=tuple(row["frames"]),
                ),
                message=row["message"],
                provenance=Provenance.model_validate(row["provenance"]),
            )
            for row in rows
        ]

    async def runs(self, run_ids: Sequence[str]) -> dict[str, RunFacts]:
        rows = await self._connection.fetch(
            f"""
            SELECT {_RUN_FACTS} FROM unnest($2::text[]) AS wanted (id)
            JOIN runs r ON r.namespace = $1 AND r.run_id = wanted.id
            {_DIGEST_OF_RUN}
            """,
            self._namespace, list(run_ids),
        )
        return {row["run_id"]: _run_facts(row) for row in rows}

    async def succeeded_runs(
        self, task_keys: Sequence[str], repos: Sequence[str], since: datetime
    ) -> list[RunFacts]:
        """Succeeded runs finished after `since` with one of these task keys or repos."""
        rows = await self._connection.fetch(
            f"""
            SELECT {_RUN_FACTS} FROM runs r {_DIGEST_OF_RUN}
            WHERE r.namespace = $1 AND r.status = 'succeeded' AND r.finished_at > $4
              AND (r.task_key = ANY($2::text[]) OR r.repo = ANY($3::text[]))
            """,
            self._namespace, list(task_keys), list(repos), since,
        )
        return [_run_facts(row) for row in rows]

    async def save(
        self, record: Record, embed: Callable[[Record], Awaitable[Vector]]
    ) -> SavedVersion | None:
        """Store `record` as the next version of itself if it changed, and return the version
        to index and announce with its vector; None when there is nothing to do (unchanged
        and already announced, as on every replay)."""
        current = await self._connection.fetchrow(
            "SELECT version, title, text, body, tags, related_ids, announced_at, updated_at"
            " FROM records WHERE record_id = $1 FOR UPDATE",
            record.record_id,
        )
        unchanged = current is not None and (
            current["title"], current["text"], current["body"], tuple(current["tags"]),
            tuple(current["related_ids"]),
        ) == (record.title, record.text, record.body, record.tags, record.related_ids)
        if unchanged and current is not None:
            if current["announced_at"] is not None:
                return None
            return SavedVersion(int(current["version"]), await embed(record),
                                current["updated_at"])
        vector = await embed(record)
        lexical = record_vector(record)
        if current is None:
            version = 1
            await self._connection.execute(_INSERT_RECORD, *_record_args(record, vector))
        else:
            version = int(current["version"]) + 1
            await self._connection.execute(
                """
                UPDATE records SET title = $2, text = $3, body = $4, tags = $5,
                       related_ids = $6, provenance = $7, source_event_id = $8,
                       embedding = $9, version = $10, updated_at = now(), announced_at = NULL,
                       lexical = $11, lexical_terms = $12
                WHERE record_id = $1
                """,
                record.record_id, record.title, record.text, record.body, list(record.tags),
                list(record.related_ids), record.provenance.model_dump(),
                record.provenance.source_event_id, vector, version, lexical,
                list(lexical.indices),
            )
        await self._connection.execute(
            _INSERT_VERSION, record.record_id, version, record.text, record.body,
            record.provenance.source_event_id, version_fields(record),
            "created" if version == 1 else "updated", record.provenance.producer,
        )
        return SavedVersion(version, vector)


_REPORT_COLUMNS = (
    "report_id, namespace, reason, started_at, finished_at, memories, clusters, merged_ids,"
    " new_ids, timings, announced_at"
)

_RUN_FACTS = (
    "r.run_id, r.task_key, r.repo, r.status, r.finished_at, d.body AS digest"
)
_DIGEST_OF_RUN = (
    "LEFT JOIN records d ON d.namespace = r.namespace AND d.run_ref = r.run_id"
    " AND d.record_kind = 'run_digest'"
)


def _run_facts(row: Mapping[str, Any]) -> RunFacts:
    digest: Mapping[str, Any] = row["digest"] or {}
    return RunFacts(
        run_id=row["run_id"],
        task_key=row["task_key"],
        repo=row["repo"],
        status=row["status"],
        finished_at=row["finished_at"],
        commits=tuple(digest.get("commits", ())),
        pull_requests=tuple(digest.get("pull_requests", ())),
        files_changed=tuple(digest.get("files_changed", ())),
        key_changes=tuple(item["text"] for item in digest.get("key_changes", ())),
    )


async def _insert_new_records(connection: asyncpg.Connection,
                              records: Sequence[tuple[Record, Vector]]) -> None:
    """Store records with their first version, made by the event that made the record;
    a record stored already stays as it is."""
    await connection.executemany(
        f"{_INSERT_RECORD} ON CONFLICT (record_id) DO NOTHING",
        [_record_args(record, vector) for record, vector in records],
    )
    await connection.executemany(
        f"{_INSERT_VERSION} ON CONFLICT (record_id, version) DO NOTHING",
        [(record.record_id, 1, record.text, record.body, record.provenance.source_event_id,
          version_fields(record), "created", record.provenance.producer)
         for record, _ in records],
    )


def record_of(row: Mapping[str, Any]) -> Record:
    return Record(
        record_id=row["record_id"], namespace=row["namespace"],
        record_kind=row["record_kind"], scope=row["scope"], agent_id=row["agent_id"],
        title=row["title"], text=row["text"], body=row["body"],
        memory_type=row["memory_type"], tags=tuple(row["tags"]),
        related_ids=tuple(row["related_ids"]), tier=row["tier"],
        review_state=row["review_state"], trust_class=row["trust_class"],
        source_ref=row["source_ref"], run_ref=row["run_ref"], thread=row["thread"],
        provenance=Provenance.model_validate(row["provenance"]),
        created_at=row["created_at"], expires_at=row["expires_at"],
    )


def _record_args(record: Record, vector: Vector) -> tuple[Any, ...]:
    lexical = record_vector(record)
    return (
        record.record_id, record.namespace, record.record_kind, record.scope, record.agent_id,
        record.title, record.text, record.body, record.memory_type, list(record.tags),
        list(record.related_ids), record.tier, record.review_state, record.trust_class,
        record.source_ref, record.run_ref, record.provenance.model_dump(),
        record.provenance.source_event_id, record.created_at, record.expires_at, vector,
        record.thread, lexical, list(lexical.indices),
    )
