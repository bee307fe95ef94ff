"""The facts fix patterns are built from: the errors runs met (by signature), the runs that
may have fixed them, and each pattern's versions, rebuilt under its signature's lock.
`FixPatterns` is the contract the stream stages use; `PostgresFixPatterns` keeps it in the
source of truth."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

import asyncpg

from memstream_client.events import Provenance
from processors.memory.lifecycle import version_fields
from processors.runs.fix_patterns import ErrorOccurrence, RunFacts
from processors.runs.signatures import ErrorSignature
from processors.text.embedding import Vector
from processors.text.lexical import record_presence, record_vector
from schemas.records import Record
from stores.postgres.rows import INSERT_RECORD, INSERT_VERSION, record_args


@dataclass(frozen=True)
class SavedVersion:
    """A record version saved (or found saved and not yet announced) and its vector."""

    version: int
    vector: Vector
    # When an earlier try saved it: it may have been announced since.
    stored_before: datetime | None = None


class FixPatternSession(Protocol):
    """Reads the facts of one fix pattern and saves its new version, inside the lock."""

    async def occurrences(self) -> list[ErrorOccurrence]:
        """The signature's occurrences, oldest first."""

    async def runs(self, run_ids: Sequence[str]) -> dict[str, RunFacts]: ...

    async def succeeded_runs(
        self, task_keys: Sequence[str], repos: Sequence[str], since: datetime
    ) -> list[RunFacts]:
        """Succeeded runs finished after `since` with one of these task keys or repos."""

    async def save(
        self, record: Record, embed: Callable[[Record], Awaitable[Vector]]
    ) -> SavedVersion | None:
        """Store `record` as the next version of itself if it changed, and return the version
        to index and announce with its vector; None when there is nothing to do (unchanged
        and already announced, as on every replay)."""


class FixPatterns(Protocol):
    async def append_error_occurrences(self, occurrences: Sequence[ErrorOccurrence]) -> None:
        ...

    async def run_signatures(self, namespace: str, run_id: str) -> list[str]:
        """The error signatures a run met, the latest first."""

    async def run_occurrences(self, namespace: str, run_id: str) -> list[ErrorOccurrence]:
        """The errors a run met, in the order it met them."""

    async def patterns_fixed_by(self, namespace: str, run_id: str) -> list[str]:
        """The record ids of the fix patterns that name this run among their fixes."""

    async def signatures_fixable_by(
        self, runs: Iterable[tuple[str, str]], window: timedelta
    ) -> set[tuple[str, str]]:
        """The (namespace, signature_id) pairs that these runs, if they succeeded, may have
        fixed: met before they finished in the same run, a run of the same task_key, or one
        without a task_key in the same repo within `window`. A superset; the fix rules of
        processors.runs.fix_patterns decide."""

    def session(self, namespace: str,
                signature_id: str) -> AbstractAsyncContextManager[FixPatternSession]:
        """One transaction holding the signature's lock: workers that rebuild the same fix
        pattern at once take turns, so the last write is built from all committed facts."""


class PostgresFixPatterns:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

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

    async def run_signatures(self, namespace: str, run_id: str) -> list[str]:
        rows = await self._pool.fetch(
            "SELECT signature_id, max(occurred_at) AS last FROM error_occurrences"
            " WHERE namespace = $1 AND run_id = $2 GROUP BY signature_id ORDER BY last DESC",
            namespace, run_id)
        return [row["signature_id"] for row in rows]

    async def run_occurrences(self, namespace: str, run_id: str) -> list[ErrorOccurrence]:
        rows = await self._pool.fetch(
            "SELECT * FROM error_occurrences WHERE namespace = $1 AND run_id = $2"
            " ORDER BY occurred_at, event_id",
            namespace, run_id)
        return [_occurrence(row) for row in rows]

    async def patterns_fixed_by(self, namespace: str, run_id: str) -> list[str]:
        rows = await self._pool.fetch(
            """
            SELECT record_id FROM records
            WHERE namespace = $1 AND record_kind = 'fix_pattern'
              AND body->'fixes' @> jsonb_build_array(jsonb_build_object('run_id', $2::text))
            ORDER BY record_id
            """,
            namespace, run_id)
        return [row["record_id"] for row in rows]

    async def signatures_fixable_by(
        self, runs: Iterable[tuple[str, str]], window: timedelta
    ) -> set[tuple[str, str]]:
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
    async def session(self, namespace: str,
                      signature_id: str) -> AsyncIterator[PostgresFixPatternSession]:
        async with self._pool.acquire() as connection, connection.transaction():
            await connection.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                f"fix_pattern\x1f{namespace}\x1f{signature_id}",
            )
            yield PostgresFixPatternSession(connection, namespace, signature_id)


class PostgresFixPatternSession:
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
        return [_occurrence(row) for row in rows]

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
            await self._connection.execute(INSERT_RECORD, *record_args(record, vector))
        else:
            version = int(current["version"]) + 1
            await self._connection.execute(
                """
                UPDATE records SET title = $2, text = $3, body = $4, tags = $5,
                       text_tokens = CASE WHEN text = $3 THEN text_tokens END,
                       related_ids = $6, provenance = $7, source_event_id = $8,
                       embedding = $9, version = $10, updated_at = now(), announced_at = NULL,
                       lexical = $11, lexical_terms = $12, term_presence = $13
                WHERE record_id = $1
                """,
                record.record_id, record.title, record.text, record.body, list(record.tags),
                list(record.related_ids), record.provenance.model_dump(),
                record.provenance.source_event_id, vector, version, lexical,
                list(lexical.indices), record_presence(record),
            )
        await self._connection.execute(
            INSERT_VERSION, record.record_id, version, record.text, record.body,
            record.provenance.source_event_id, version_fields(record),
            "created" if version == 1 else "updated", record.provenance.producer,
            record.namespace,
        )
        return SavedVersion(version, vector)


_RUN_FACTS = (
    "r.run_id, r.task_key, r.repo, r.status, r.finished_at, d.body AS digest"
)
_DIGEST_OF_RUN = (
    "LEFT JOIN records d ON d.namespace = r.namespace AND d.run_ref = r.run_id"
    " AND d.record_kind = 'run_digest'"
)


def _occurrence(row: Mapping[str, Any]) -> ErrorOccurrence:
    return ErrorOccurrence(
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
