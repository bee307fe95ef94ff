"""The adaptive scoring's config per namespace (`scoring_config_versions`): every change a
version, the newest in effect. Recalls read it on every search, so `PostgresScoringConfigs`
keeps what it read for `max_age_s`: a change reaches every worker within that time, without
a restart, and a search pays no query for it the rest of the time.

A change (`memory.scoring`, streams/stages/memory/scoring_config.py) is applied in one transaction
that holds the namespace's lock: the newest version read, the change applied to it by the
rules (processors/recall/scoring_changes.py), the next version written; its event id is the proof
it was applied, so a replay adds no version.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Protocol

import asyncpg

from processors.recall.adaptive_scoring import ScoringConfig
from processors.recall.scoring_changes import changed_config

# How stale a worker's view of a namespace's config may be.
DEFAULT_MAX_AGE_S = 2.0


@dataclass(frozen=True)
class CurrentScoring:
    """The config a namespace scores with, and its version (0: never changed, the
    defaults), who changed it last and when."""

    version: int
    config: ScoringConfig
    changed_by: str | None = None
    changed_at: datetime | None = None


DEFAULT_SCORING = CurrentScoring(0, ScoringConfig())


@dataclass(frozen=True)
class ScoringChange:
    """One `memory.scoring` event as the store applies it."""

    event_id: str
    namespace: str
    changes: Mapping[str, int | float]
    changed_by: str
    changed_at: datetime
    expected_version: int | None


@dataclass(frozen=True)
class ScoringVersion:
    """One version of a namespace's config: every parameter after the change, and what the
    change set."""

    version: int
    config: ScoringConfig
    changes: dict[str, int | float]
    changed_by: str
    changed_at: datetime
    event_id: str


class ScoringConfigs(Protocol):
    async def current(self, namespace: str) -> CurrentScoring:
        """The namespace's config in effect (at most the store's max age old)."""

    async def newest(self, namespace: str) -> CurrentScoring:
        """The namespace's newest config, read now: the one a change applies to."""

    async def apply_change(self, change: ScoringChange) -> ScoringVersion | None:
        """Apply a change to the newest version as the next one, in one transaction; None
        (and nothing changed) if its event was applied before. Raises
        `RefusedScoringChange` for a change made on another version or one whose result is
        invalid."""

    async def history(self, namespace: str, limit: int) -> list[ScoringVersion]:
        """The namespace's latest versions, newest first."""


_NEWEST = """
    SELECT version, config, changed_by, changed_at FROM scoring_config_versions
    WHERE namespace = $1 ORDER BY version DESC LIMIT 1
"""


class PostgresScoringConfigs:
    def __init__(self, pool: asyncpg.Pool, max_age_s: float = DEFAULT_MAX_AGE_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._pool = pool
        self._max_age_s = max_age_s
        self._clock = clock
        self._read: dict[str, tuple[float, CurrentScoring]] = {}

    async def current(self, namespace: str) -> CurrentScoring:
        now = self._clock()
        cached = self._read.get(namespace)
        if cached is not None and now - cached[0] < self._max_age_s:
            return cached[1]
        scoring = await self.newest(namespace)
        self._read[namespace] = (now, scoring)
        return scoring

    async def newest(self, namespace: str) -> CurrentScoring:
        return _current_of(await self._pool.fetchrow(_NEWEST, namespace))

    async def apply_change(self, change: ScoringChange) -> ScoringVersion | None:
        async with self._pool.acquire() as connection, connection.transaction():
            # One change of a namespace at a time: each reads the version the last one wrote.
            await connection.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                                     f"scoring_config\x1f{change.namespace}")
            if await connection.fetchval(
                    "SELECT 1 FROM scoring_config_versions WHERE event_id = $1",
                    change.event_id):
                return None
            newest = _current_of(await connection.fetchrow(_NEWEST, change.namespace))
            config = changed_config(newest.version, newest.config, change.changes,
                                    change.expected_version)
            row = await connection.fetchrow(
                """
                INSERT INTO scoring_config_versions (namespace, version, config, changes,
                                                     changed_by, changed_at, event_id)
                VALUES ($1, $2, $3, $4, $5, $6, $7)
                RETURNING version, config, changes, changed_by, changed_at, event_id
                """,
                change.namespace, newest.version + 1, asdict(config), dict(change.changes),
                change.changed_by, change.changed_at, change.event_id)
        # This worker sees its own change at once; the others within their max age.
        self._read.pop(change.namespace, None)
        return _version_of(row)

    async def history(self, namespace: str, limit: int) -> list[ScoringVersion]:
        rows = await self._pool.fetch(
            """
            SELECT version, config, changes, changed_by, changed_at, event_id
            FROM scoring_config_versions WHERE namespace = $1
            ORDER BY version DESC LIMIT $2
            """,
            namespace, limit)
        return [_version_of(row) for row in rows]


def _current_of(row: Mapping[str, Any] | None) -> CurrentScoring:
    if row is None:
        return DEFAULT_SCORING
    return CurrentScoring(row["version"], ScoringConfig(**row["config"]), row["changed_by"],
                          row["changed_at"])


def _version_of(row: Mapping[str, Any]) -> ScoringVersion:
    return ScoringVersion(row["version"], ScoringConfig(**row["config"]), row["changes"],
                          row["changed_by"], row["changed_at"], row["event_id"])
