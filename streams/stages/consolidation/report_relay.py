"""Publish the consolidations that the consolidator process wrote to Postgres: index the
replacements, take the superseded members out of the index, announce both (`merged`,
`superseded`), then mark the report announced.

Runs on a timer in every worker that owns the index. A report is leased to one worker at a
time; a worker that dies mid-way lets its lease run out and another takes the report over,
reading the announcement log back from the first try so that nothing is announced twice.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from schemas.topics import MEMORY_CONSOLIDATE
from stores.consolidations import ReportLease
from streams.plumbing.runtime import Runtime
from streams.stages.record_sink import RecordChange, RecordSink

log = logging.getLogger(__name__)

LEASE = timedelta(seconds=60)
REPORTS_PER_TICK = 10
CHANGES_PER_PART = 256


class ReportRelay:
    def __init__(self, runtime: Runtime, sink: RecordSink) -> None:
        self._runtime = runtime
        self._sink = sink
        self._attempts = runtime.attempts(MEMORY_CONSOLIDATE)

    async def publish_pending(self) -> int:
        """Publish the reports that are waiting; return how many were published."""
        published = 0
        consolidations = self._runtime.stores.consolidations
        for report_id in await consolidations.unannounced_reports(REPORTS_PER_TICK):
            lease = await consolidations.lease_report(report_id, LEASE)
            if lease is not None and await self._publish(lease):
                published += 1
        return published

    async def _publish(self, lease: ReportLease) -> bool:
        runtime = self._runtime
        started = time.perf_counter()
        records = runtime.stores.records
        merged = await records.stored_records(lease.namespace, lease.new_ids)
        members = await records.stored_records(lease.namespace, lease.merged_ids)
        by_id = {item.record.record_id: item.record for item in merged}
        changes = [
            RecordChange(item.record, "merged", item.version, item.vector,
                         maybe_announced_since=lease.tried_since)
            for item in merged if item.superseded_by is None and item.vector is not None
        ] + [
            # A member is announced with the provenance of the request that superseded it.
            RecordChange(
                item.record.model_copy(update={
                    "provenance": by_id[item.superseded_by].provenance}),
                "superseded", item.version, None, maybe_announced_since=lease.tried_since)
            for item in members if item.superseded_by in by_id
        ]
        failed = []
        # In parts: a 10k consolidation changes thousands of records, and the writes this
        # worker also serves get the event loop between the parts.
        for start in range(0, len(changes), CHANGES_PER_PART):
            part = await self._sink.publish(changes[start:start + CHANGES_PER_PART],
                                            self._attempts)
            failed += part.failed
        if failed:
            for change, error in failed:
                log.error("report %s: could not publish %s %s: %s (tried again once its "
                          "lease ends)", lease.report_id, change.change, change.record_id,
                          error.detail)
            return False
        seconds = time.perf_counter() - started
        await runtime.stores.consolidations.mark_report_announced(lease.report_id,
                                                                  {"publish": seconds})
        runtime.metrics.consolidation_seconds.labels("publish").observe(seconds)
        return True
