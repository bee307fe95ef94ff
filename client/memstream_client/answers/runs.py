"""Run history: runs, their ledgers, digests, errors and the fix patterns they met or fixed."""

from __future__ import annotations

from typing import Any

from memstream_client.answers.base import Answer, Instant


class RunSummary(Answer):
    run_id: str
    # succeeded, failed, cancelled, or unfinished.
    status: str
    task_key: str | None
    repo: str | None
    agent: str | None
    intent: str | None
    started_at: Instant | None
    finished_at: Instant | None
    event_count: int
    # Distinct error signatures met.
    error_count: int


class RunList(Answer):
    namespace: str
    truncated: bool
    # Newest first.
    runs: list[RunSummary]


class RunEvent(Answer):
    event_id: str
    type: str
    occurred_at: Instant
    producer: str
    payload: dict[str, Any]


class RunDigest(Answer):
    record_id: str
    title: str | None
    text: str
    version: int
    review_state: str
    body: dict[str, Any]


class ErrorFixPattern(Answer):
    record_id: str
    title: str | None
    text: str
    version: int
    review_state: str
    occurrences: dict[str, Any] | None
    fixes: list[dict[str, Any]]
    success_count: int


class RunError(Answer):
    signature_id: str
    dialect: str
    exception_type: str | None
    template: str
    frames: list[str]
    count: int
    first_seen: Instant
    example: str
    fix_pattern: ErrorFixPattern | None


class FixedPattern(Answer):
    record_id: str
    title: str | None
    signature_id: str | None
    after_runs: list[str]


class RunHistory(Answer):
    namespace: str
    run: RunSummary
    # The first 500, oldest first.
    events: list[RunEvent]
    # None until the run finishes.
    digest: RunDigest | None
    errors: list[RunError]
    fixed: list[FixedPattern]


class RunEventAccepted(Answer):
    event_id: str
    run_id: str
