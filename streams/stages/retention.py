"""The retention job: on a timer in every worker that owns the index, expired records are
marked in Postgres (a version each), taken out of the index and announced `expired`, through
the record sink like every change. A record marked but not announced (the worker died in
between) is published again, the announcement log read back first."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from processors.memory.retention import RetentionRules
from schemas.topics import MEMORY_EVENTS
from stores.record_versions import ExpiredRecord, ExpiringRecords
from streams.plumbing.runtime import Runtime
from streams.stages.record_sink import RecordChange, RecordSink

log = logging.getLogger(__name__)

RECORDS_PER_TICK = 500
# A record marked this long ago and still unannounced was left by a worker that died.
ORPHANED_AFTER = timedelta(seconds=60)


class RetentionJob:
    def __init__(self, runtime: Runtime, sink: RecordSink, rules: RetentionRules) -> None:
        self._runtime = runtime
        self._sink = sink
        self._store: ExpiringRecords = runtime.stores.versions
        self._rules = rules
        self._attempts = runtime.attempts(MEMORY_EVENTS)

    async def expire_due(self) -> int:
        """Expire what is due now and finish what an earlier run left; return how many
        records were published."""
        orphaned = await self._store.unannounced_expired(ORPHANED_AFTER, RECORDS_PER_TICK)
        published = await self._publish(orphaned, read_back=True)
        expired = await self._store.expire_due(self._rules.cutoffs(datetime.now(UTC)),
                                               RECORDS_PER_TICK)
        published += await self._publish(expired, read_back=False)
        return published

    async def _publish(self, expired: list[ExpiredRecord], read_back: bool) -> int:
        if not expired:
            return 0
        changes = [RecordChange(item.record, "expired", item.version, None,
                                maybe_announced_since=item.expired_at if read_back else None)
                   for item in expired]
        result = await self._sink.publish(changes, self._attempts)
        for change, error in result.failed:
            log.error("could not publish the expiry of %s: %s (tried again later)",
                      change.record_id, error.detail)
        self._runtime.metrics.expired_records.inc(len(result.done))
        return len(result.done)
