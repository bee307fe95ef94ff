"""What consolidation does to a namespace, over HTTP: what the trigger sees of it
(`GET /v1/consolidation/counts`) and the maintenance reports (`GET /v1/consolidation/reports`),
with what names the records they list."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from faust.web import Request, View

from memstream_client.answers.consolidation import (
    ConsolidationCounts,
    ConsolidationReports,
    CountedRequest,
    CountWindow,
    CurrentWindow,
    MaintenanceReport,
    ReportRecord,
    TriggerRules,
)
from processors.api.access import Caller
from processors.api.parameters import integer
from processors.consolidation.trigger import skip_reason, window_start
from stores import consolidations
from stores.records import Records
from streams.api.auth import granted_namespace
from streams.api.pages import Pages
from streams.api.params import NAMESPACE_PARAMS, Param, Params, value
from streams.plumbing.runtime import Runtime

# Maintenance reports listed per request, by default and at most.
REPORTS_LIMIT = 20
MAX_REPORTS_LIMIT = 200
REPORTS = integer(1, MAX_REPORTS_LIMIT)
REPORTS_PARAMS: Params = {**NAMESPACE_PARAMS, "limit": Param(REPORTS)}


def wire_consolidation(pages: Pages, runtime: Runtime) -> None:
    @pages.page("/v1/consolidation/counts", params=NAMESPACE_PARAMS,
                answer=ConsolidationCounts)
    async def counts_view(web: View, request: Request, caller: Caller) -> ConsolidationCounts:
        """What the consolidation trigger sees of the namespace."""
        namespace = granted_namespace(caller, request.query)
        return await consolidation_counts(runtime, namespace)

    @pages.page("/v1/consolidation/reports", params=REPORTS_PARAMS,
                answer=ConsolidationReports)
    async def reports_view(web: View, request: Request,
                           caller: Caller) -> ConsolidationReports:
        """The namespace's maintenance reports, newest first, with what names their
        records."""
        namespace = granted_namespace(caller, request.query)
        limit = value(request.query, "limit", REPORTS, REPORTS_LIMIT)
        reports = await runtime.stores.consolidations.reports(namespace, limit)
        return ConsolidationReports(
            namespace=namespace, reports=[report_answer(report) for report in reports],
            records=await report_records(runtime.stores.records, caller, namespace, reports))


def report_answer(report: consolidations.MaintenanceReport) -> MaintenanceReport:
    return MaintenanceReport(
        report_id=report.report_id, namespace=report.namespace, reason=report.reason,
        started_at=report.started_at, finished_at=report.finished_at,
        memories=report.memories, clusters=report.clusters, merged_ids=report.merged_ids,
        new_ids=report.new_ids, timings=report.timings, announced_at=report.announced_at)


async def report_records(records: Records, caller: Caller, namespace: str,
                         reports: Sequence[consolidations.MaintenanceReport]
                         ) -> dict[str, ReportRecord]:
    """What names each record the reports list (title, kind, the start of its text), of
    those the caller may see: a reader is shown words, not only ids."""
    named = dict.fromkeys(record_id for report in reports for record_id in (
        *report.new_ids, *report.merged_ids,
        *(member for cluster in report.clusters for member in cluster.get("members", ())),
    ))
    found = await records.record_excerpts(namespace, list(named))
    return {record_id: ReportRecord(record_kind=record.record_kind, title=record.title,
                                    excerpt=record.excerpt)
            for record_id, record in found.items() if caller.sees(record.scope, record.agent_id)}


async def consolidation_counts(runtime: Runtime, namespace: str) -> ConsolidationCounts:
    """What the trigger sees of a namespace: its windows of new memories, the facts the rules
    ask, whether it is due, and its latest counted request."""
    rules = runtime.trigger_rules
    facts = await runtime.stores.consolidations.facts(namespace)
    counts = await runtime.stores.consolidations.counts(namespace)
    current = window_start(datetime.now(UTC), rules.window)
    windows = counts.windows
    last = counts.last_request
    return ConsolidationCounts(
        namespace=namespace,
        window_s=rules.window.total_seconds(),
        current_window=CurrentWindow(start=current, memories=next(
            (w.memories for w in windows if w.window_start == current), 0)),
        windows=[CountWindow(window_start=w.window_start, memories=w.memories)
                 for w in windows],
        new_since_report=facts.new_since_report,
        reports_today=facts.reports_today,
        last_report_id=facts.last_report_id,
        skip_reason=skip_reason(reports_today=facts.reports_today,
                                new_since_report=facts.new_since_report, rules=rules),
        last_request=None if last is None else CountedRequest(
            request_id=last.request_id, basis=last.basis, new_memories=last.new_memories,
            claimed_at=last.claimed_at, sent_at=last.sent_at),
        rules=TriggerRules(min_new_memories=rules.min_new_memories,
                           once_per_day=rules.once_per_day),
    )
