"""The adaptive scoring's config per namespace (`scoring_config_versions`): every change a
version, the newest in effect. Recalls read it on every search, so `PostgresScoringConfigs`
keeps what it read for `max_age_s`: a change reaches every worker within that time, without
a restart, and a search pays no query for it the rest of the time."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import asyncpg

from processors.adaptive_scoring import ScoringConfig

# How stale a worker's view of a namespace's config may be.
DEFAULT_MAX_AGE_S = 2.0


@dataclass(frozen=True)
class CurrentScoring:
    """The config a namespace scores with, and its version (0: never changed, the
    defaults)."""

    version: int
    config: ScoringConfig


DEFAULT_SCORING = CurrentScoring(0, ScoringConfig())


class ScoringConfigs(Protocol):
    async def current(self, namespace: str) -> CurrentScoring:
        """The namespace's config in effect (at most the store's max age old)."""


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
        row = await self._pool.fetchrow(
            """
            SELECT version, config FROM scoring_config_versions
            WHERE namespace = $1 ORDER BY version DESC LIMIT 1
            """,
            namespace)
        scoring = DEFAULT_SCORING if row is None else CurrentScoring(
            row["version"], ScoringConfig(**row["config"]))
        self._read[namespace] = (now, scoring)
        return scoring
