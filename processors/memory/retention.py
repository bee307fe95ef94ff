"""Retention: how long each kind of record lives (seed 002: digests and fix patterns are
small and valuable, kept long; memories live until their own `expires_at`, if any).

A record expires at the earlier of its `expires_at` and its last change plus its kind's
retention; a kind without a retention keeps its records until their `expires_at`. An expired
record leaves the index and every answer; Postgres keeps it, marked, with its history.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import get_args

from memstream_client.events import RecordKind

DEFAULT_RETENTION: Mapping[RecordKind, timedelta | None] = {
    "memory": None,
    "run_digest": timedelta(days=730),
    "fix_pattern": None,
    # A document's chunks live as long as the document: a new version or a delete removes
    # them.
    "doc_chunk": None,
}


@dataclass(frozen=True)
class RetentionRules:
    by_kind: Mapping[RecordKind, timedelta | None] = field(
        default_factory=lambda: dict(DEFAULT_RETENTION))

    def cutoffs(self, now: datetime) -> dict[RecordKind, datetime]:
        """Per kind with a retention: a record last changed before this has expired."""
        return {kind: now - age for kind, age in self.by_kind.items() if age is not None}


def parse_retention(raw: str) -> RetentionRules:
    """`kind=days` pairs, comma separated (`run_digest=365,memory=90`); `never` or 0 keeps a
    kind forever; kinds not named keep their defaults."""
    kinds: dict[str, RecordKind] = {kind: kind for kind in get_args(RecordKind)}
    by_kind: dict[RecordKind, timedelta | None] = dict(DEFAULT_RETENTION)
    for pair in filter(None, (part.strip() for part in raw.split(","))):
        name, _, days = pair.partition("=")
        kind = kinds.get(name.strip())
        if kind is None:
            raise ValueError(f"retention: unknown record kind {name.strip()!r} "
                             f"(one of {', '.join(sorted(kinds))})")
        by_kind[kind] = _days(kind, days.strip().lower())
    return RetentionRules(by_kind)


def _days(kind: RecordKind, days: str) -> timedelta | None:
    if days in ("never", "0"):
        return None
    try:
        value = float(days)
    except ValueError:
        raise ValueError(f"retention of {kind}: expected days or never, got {days!r}") from None
    if value < 0:
        raise ValueError(f"retention of {kind}: days must not be negative")
    return timedelta(days=value)
