"""Consolidation: the windowed counts that trigger it and its maintenance reports."""

from __future__ import annotations

from typing import Any

from memstream_client.answers.base import Answer, Instant


class CountWindow(Answer):
    window_start: Instant
    memories: int


class CurrentWindow(Answer):
    start: Instant
    memories: int


class CountedRequest(Answer):
    request_id: str
    basis: str
    new_memories: int
    claimed_at: Instant
    sent_at: Instant | None


class TriggerRules(Answer):
    min_new_memories: int
    once_per_day: bool


class ConsolidationCounts(Answer):
    namespace: str
    window_s: float
    current_window: CurrentWindow
    # Newest first.
    windows: list[CountWindow]
    new_since_report: int
    reports_today: int
    last_report_id: str | None
    # Why no request is due (`report_today`, `too_few_new_memories`); None: one is.
    skip_reason: str | None
    last_request: CountedRequest | None
    rules: TriggerRules


class MaintenanceReport(Answer):
    report_id: str
    namespace: str
    reason: str
    started_at: Instant
    finished_at: Instant
    memories: int
    clusters: list[dict[str, Any]]
    merged_ids: list[str]
    new_ids: list[str]
    # Seconds by phase.
    timings: dict[str, float]
    announced_at: Instant | None


class ReportRecord(Answer):
    record_kind: str
    title: str | None
    excerpt: str


class ConsolidationReports(Answer):
    namespace: str
    # Newest first.
    reports: list[MaintenanceReport]
    # What names each record the reports list, of those the key may see.
    records: dict[str, ReportRecord]
