"""What consolidation does to a namespace, over HTTP: what the trigger sees of it
(`GET /v1/consolidation/counts`) and the maintenance reports (`GET /v1/consolidation/reports`),
with what names the records they list."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from faust.web import Request, Response, View

from processors.api.access import Caller
from processors.api.parameters import integer
from processors.consolidation.trigger import skip_reason, window_start
from stores.consolidations import MaintenanceReport
from stores.records import Records
from streams.api.auth import granted_namespace
from streams.api.pages import Pages
from streams.api.params import NAMESPACE_PARAMS, Param, Params, value
from streams.plumbing.json_values import jsonable
from streams.plumbing.runtime import Runtime

# Maintenance reports listed per request, by default and at most.
REPORTS_LIMIT = 20
MAX_REPORTS_LIMIT = 200
REPORTS = integer(1, MAX_REPORTS_LIMIT)
REPORTS_PARAMS: Params = {**NAMESPACE_PARAMS, "limit": Param(REPORTS)}


def wire_consolidation(pages: Pages, runtime: Runtime) -> None:
    @pages.page("/v1/consolidation/counts", params=NAMESPACE_PARAMS)
    async def counts_view(web: View, request: Request, caller: Caller) -> Response:
        namespace = granted_namespace(caller, request.query)
        return web.json(jsonable(await consolidation_counts(runtime, namespace)))

    @pages.page("/v1/consolidation/reports", params=REPORTS_PARAMS)
    async def reports_view(web: View, request: Request, caller: Caller) -> Response:
        namespace = granted_namespace(caller, request.query)
        limit = value(request.query, "limit", REPORTS, REPORTS_LIMIT)
        reports = await runtime.stores.consolidations.reports(namespace, limit)
        return web.json({"namespace": namespace, "reports": jsonable(reports),
                         "records": await report_records(runtime.stores.records, caller,
                                                         namespace, reports)})


async def report_records(records: Records, caller: Caller, namespace: str,
                         reports: Sequence[MaintenanceReport]) -> dict[str, dict[str, Any]]:
    """What names each record the reports list (title, kind, the start of its text), of
    those the caller may see: a reader is shown words, not only ids."""
    named = dict.fromkeys(record_id for report in reports for record_id in (
        *report.new_ids, *report.merged_ids,
        *(member for cluster in report.clusters for member in cluster.get("members", ())),
    ))
    found = await records.record_excerpts(namespace, list(named))
    return {record_id: {"record_kind": record.record_kind, "title": record.title,
                        "excerpt": record.excerpt}
            for record_id, record in found.items() if caller.sees(record.scope, record.agent_id)}


async def consolidation_counts(runtime: Runtime, namespace: str) -> dict[str, Any]:
    """What the trigger sees of a namespace: its windows of new memories, the facts the rules
    ask, whether it is due, and its latest counted request."""
    rules = runtime.trigger_rules
    facts = await runtime.stores.consolidations.facts(namespace)
    counts = await runtime.stores.consolidations.counts(namespace)
    current = window_start(datetime.now(UTC), rules.window)
    windows = counts.windows
    return {
        "namespace": namespace,
        "window_s": rules.window.total_seconds(),
        "current_window": {"start": current, "memories": next(
            (w.memories for w in windows if w.window_start == current), 0)},
        "windows": windows,
        "new_since_report": facts.new_since_report,
        "reports_today": facts.reports_today,
        "last_report_id": facts.last_report_id,
        "skip_reason": skip_reason(reports_today=facts.reports_today,
                                   new_since_report=facts.new_since_report, rules=rules),
        "last_request": counts.last_request,
        "rules": {"min_new_memories": rules.min_new_memories,
                  "once_per_day": rules.once_per_day},
    }
