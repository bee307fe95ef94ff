"""The retrieval log (seed 003's memory_retrieval_log): every record that search or context
surfaced, with its rank, for the scoring that learns from use.

Reads must not wait for it: a read only queues its rows (no I/O), and a timer writes what is
queued in one COPY. While Postgres is away the queue holds up to `MAX_QUEUED` rows; beyond
that the oldest are dropped and counted (`memstream_retrieval_log_dropped_total`): the log
informs scoring, it must never hold memory hostage.
"""

from __future__ import annotations

import hashlib
import logging
from collections import deque
from collections.abc import Sequence
from datetime import UTC, datetime

from stores.retrievals import RetrievalRow, Retrievals
from streams.plumbing.metrics import Metrics

log = logging.getLogger(__name__)

MAX_QUEUED = 100_000
ROWS_PER_WRITE = 5_000


def query_hash(query: str) -> str:
    return hashlib.sha256(query.strip().lower().encode()).hexdigest()[:16]


class RetrievalLog:
    def __init__(self, retrievals: Retrievals, metrics: Metrics) -> None:
        self._retrievals = retrievals
        self._metrics = metrics
        self._queued: deque[RetrievalRow] = deque()

    def surfaced(self, *, namespace: str, record_ids: Sequence[str], query: str, route: str,
                 agent_id: str | None, run_id: str | None) -> None:
        """Queue the records a read returned, in rank order."""
        now = datetime.now(UTC)
        digest = query_hash(query)
        for rank, record_id in enumerate(record_ids, 1):
            if len(self._queued) >= MAX_QUEUED:
                self._queued.popleft()
                self._metrics.retrieval_log_dropped.inc()
            self._queued.append(RetrievalRow(namespace, record_id, agent_id, run_id, digest,
                                             route, rank, now))

    async def write_queued(self) -> int:
        """Write what is queued; return how many rows were written. On failure the rows stay
        queued for the next try."""
        written = 0
        while self._queued:
            batch = [self._queued[i] for i in range(min(ROWS_PER_WRITE, len(self._queued)))]
            try:
                await self._retrievals.log_retrievals(batch)
            except Exception as exc:
                log.warning("could not write the retrieval log (%d rows wait): %s",
                            len(self._queued), exc)
                return written
            for _ in batch:
                self._queued.popleft()
            written += len(batch)
        return written
