"""Dead letters in Postgres, as read back from the dead-letter topics: what is kept of each
(processors/events/dead_letters.py) and the listing of them, newest first. `DeadLetters` is the
contract the dead-letter stage and the HTTP face use."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import asyncpg

from processors.events.dead_letters import DeadLetterEntry


@dataclass(frozen=True)
class DeadLetterFilter:
    """Which dead letters a listing wants; every field left empty wants them all."""

    # None: every namespace, and the dead letters of none.
    namespace: str | None = None
    # None: of any reason; empty: of none.
    reasons: frozenset[str] | None = None
    # Empty: of every dead-letter topic.
    dlq_topics: frozenset[str] = frozenset()
    since: datetime | None = None


@dataclass(frozen=True)
class DeadLetterPosition:
    """Where a listing, newest first, goes on: after this dead letter."""

    dead_lettered_at: datetime
    dead_letter_id: str


class DeadLetters(Protocol):
    async def record_dead_letters(self, entries: Sequence[DeadLetterEntry]) -> set[str]:
        """Keep these dead letters, but those kept already (by id); return the ids of those
        kept now."""

    async def dead_letters(self, wanted: DeadLetterFilter, before: DeadLetterPosition | None,
                           limit: int) -> list[DeadLetterEntry]:
        """Newest first (by time, then id), after `before` if given."""

    async def dead_letter_counts(self, wanted: DeadLetterFilter) -> dict[str, int]:
        """How many there are, by reason."""

    async def dead_letter(self, dead_letter_id: str) -> DeadLetterEntry | None: ...


_COLUMNS = ("dead_letter_id", "dlq_topic", "dlq_partition", "dlq_offset", "dead_lettered_at",
            "source_topic", "source_partition", "source_offset", "namespace", "event_id",
            "personal_agent", "message_key", "reason", "error", "head", "head_utf8",
            "size_bytes", "truncated")
_TYPES = ("text", "text", "integer", "bigint", "timestamptz", "text", "integer", "bigint",
          "text", "text", "text", "text", "text", "text", "text", "boolean", "integer",
          "boolean")
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM dead_letters"


class PostgresDeadLetters:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def record_dead_letters(self, entries: Sequence[DeadLetterEntry]) -> set[str]:
        if not entries:
            return set()
        arrays = [f"${n}::{kind}[]" for n, kind in enumerate(_TYPES, 1)]
        rows = await self._pool.fetch(
            f"INSERT INTO dead_letters ({', '.join(_COLUMNS)})"
            f" SELECT * FROM unnest({', '.join(arrays)})"
            " ON CONFLICT (dead_letter_id) DO NOTHING RETURNING dead_letter_id",
            *(list(column) for column in zip(*map(_values, entries), strict=True)))
        return {row["dead_letter_id"] for row in rows}

    async def dead_letters(self, wanted: DeadLetterFilter, before: DeadLetterPosition | None,
                           limit: int) -> list[DeadLetterEntry]:
        conditions, args = _conditions(wanted)
        if before is not None:
            args += [before.dead_lettered_at, before.dead_letter_id]
            conditions.append(f"(dead_lettered_at, dead_letter_id) < (${len(args) - 1},"
                              f" ${len(args)})")
        args.append(limit)
        rows = await self._pool.fetch(
            f"{_SELECT}{_where(conditions)}"
            f" ORDER BY dead_lettered_at DESC, dead_letter_id DESC LIMIT ${len(args)}", *args)
        return [_entry(row) for row in rows]

    async def dead_letter_counts(self, wanted: DeadLetterFilter) -> dict[str, int]:
        conditions, args = _conditions(wanted)
        rows = await self._pool.fetch(
            f"SELECT reason, count(*) AS n FROM dead_letters{_where(conditions)}"
            " GROUP BY reason ORDER BY reason", *args)
        return {row["reason"]: row["n"] for row in rows}

    async def dead_letter(self, dead_letter_id: str) -> DeadLetterEntry | None:
        row = await self._pool.fetchrow(f"{_SELECT} WHERE dead_letter_id = $1", dead_letter_id)
        return None if row is None else _entry(row)


def _conditions(wanted: DeadLetterFilter) -> tuple[list[str], list[Any]]:
    """The SQL conditions of a filter and their arguments: only those it sets, so that the
    namespace's index serves a namespace's listing."""
    conditions: list[str] = []
    args: list[Any] = []

    def condition(sql: str, value: Any) -> None:
        args.append(value)
        conditions.append(sql.format(f"${len(args)}"))

    if wanted.namespace is not None:
        condition("namespace = {}", wanted.namespace)
    if wanted.reasons is not None:
        condition("reason = ANY({}::text[])", sorted(wanted.reasons))
    if wanted.dlq_topics:
        condition("dlq_topic = ANY({}::text[])", sorted(wanted.dlq_topics))
    if wanted.since is not None:
        condition("dead_lettered_at >= {}", wanted.since)
    return conditions, args


def _where(conditions: list[str]) -> str:
    return f" WHERE {' AND '.join(conditions)}" if conditions else ""


def _values(entry: DeadLetterEntry) -> tuple[Any, ...]:
    return (entry.dead_letter_id, entry.dlq_topic, entry.dlq_partition, entry.dlq_offset,
            entry.dead_lettered_at, entry.source_topic, entry.source_partition,
            entry.source_offset, entry.namespace, entry.event_id, entry.personal_agent,
            entry.key, entry.reason, entry.error,
            entry.head, entry.head_utf8, entry.size, entry.truncated)


def _entry(row: asyncpg.Record) -> DeadLetterEntry:
    return DeadLetterEntry(
        dead_letter_id=row["dead_letter_id"], dlq_topic=row["dlq_topic"],
        dlq_partition=row["dlq_partition"], dlq_offset=row["dlq_offset"],
        dead_lettered_at=row["dead_lettered_at"], source_topic=row["source_topic"],
        source_partition=row["source_partition"], source_offset=row["source_offset"],
        namespace=row["namespace"], event_id=row["event_id"],
        personal_agent=row["personal_agent"], key=row["message_key"],
        reason=row["reason"],
        error=row["error"], head=row["head"], head_utf8=row["head_utf8"],
        size=row["size_bytes"], truncated=row["truncated"])
