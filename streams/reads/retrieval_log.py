"""The retrieval log (seed 003's memory_retrieval_log): every record that search or context
surfaced, with its rank, for the scoring that learns from use; and beside it the recalls that
showed nothing, each an implicit gap (processors/recall/gaps.py) with its question.

Reads must not wait for it: a read only queues (no I/O), and a timer writes what is queued,
the log in one COPY, the gaps in one transaction. While Postgres is away each queue holds up to
`MAX_QUEUED`; beyond that the oldest are dropped and counted
(`memstream_retrieval_log_dropped_total`): the log informs scoring and the gaps, it must never
hold memory hostage.
"""

from __future__ import annotations

import hashlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import TypeVar

from stores.recall.gaps import Gaps, GapSighting
from stores.recall.retrievals import RetrievalRow, Retrievals
from streams.plumbing.metrics import Metrics

log = logging.getLogger(__name__)

MAX_QUEUED = 100_000
ROWS_PER_WRITE = 5_000

Row = TypeVar("Row")


def query_hash(query: str) -> str:
    return hashlib.sha256(query.strip().lower().encode()).hexdigest()[:16]


class RetrievalLog:
    def __init__(self, retrievals: Retrievals, gaps: Gaps, metrics: Metrics) -> None:
        self._retrievals = retrievals
        self._gaps = gaps
        self._metrics = metrics
        self._queued: deque[RetrievalRow] = deque()
        self._missed: deque[GapSighting] = deque()

    def surfaced(self, *, namespace: str, record_ids: Sequence[str], query: str, route: str,
                 agent_id: str | None, run_id: str | None) -> None:
        """Queue the records a read returned, in rank order."""
        now = datetime.now(UTC)
        digest = query_hash(query)
        for rank, record_id in enumerate(record_ids, 1):
            self._queue(self._queued, RetrievalRow(namespace, record_id, agent_id, run_id,
                                                   digest, route, rank, now))

    def missed(self, *, namespace: str, query: str, agent_id: str | None) -> None:
        """Queue an implicit gap: a recall for `query`, made for `agent_id` (or none), that
        showed nothing."""
        self._queue(self._missed, GapSighting(namespace, agent_id, "implicit", query, query,
                                              datetime.now(UTC)))

    def _queue(self, queue: deque[Row], row: Row) -> None:
        if len(queue) >= MAX_QUEUED:
            queue.popleft()
            self._metrics.retrieval_log_dropped.inc()
        queue.append(row)

    async def write_queued(self) -> int:
        """Write what is queued; return how many rows and gaps were written. On failure they
        stay queued for the next try."""
        return (await _drain(self._queued, self._retrievals.log_retrievals, "the retrieval log")
                + await _drain(self._missed, self._gaps.count_sightings, "the gaps met"))


async def _drain(queue: deque[Row], write: Callable[[Sequence[Row]], Awaitable[None]],
                 what: str) -> int:
    written = 0
    while queue:
        batch = [queue[i] for i in range(min(ROWS_PER_WRITE, len(queue)))]
        try:
            await write(batch)
        except Exception as exc:
            log.warning("could not write %s (%d rows wait): %s", what, len(queue), exc)
            return written
        for _ in batch:
            queue.popleft()
        written += len(batch)
    return written
