"""Runs over HTTP: a run event posted (`POST /v1/runs/events`, published to runs.events as a
producer would publish it), the runs of a namespace (`GET /v1/runs`) and one run with its
ledger, its digest, the errors it met with their fix patterns, and the fix patterns it fixed
(`GET /v1/runs/{run_id}`).

Runs are the namespace's, as their digests and fix patterns are (shared records): a key that
may read the namespace reads its runs. The records a run view names are shown as every read
shows records, only to a key that may see them.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, get_args

from faust.web import Request, Response, View

from memstream_client.answers.runs import (
    ErrorFixPattern,
    FixedPattern,
    RunDigest,
    RunEvent,
    RunEventAccepted,
    RunHistory,
    RunList,
    RunSummary,
)
from memstream_client.answers.runs import RunError as RunErrorAnswer
from memstream_client.events import RUN_EVENT_TYPES, RunStatus
from memstream_client.ids import digest_record_id, fix_pattern_record_id
from processors.api.access import Caller
from processors.api.openapi import event_body
from processors.api.parameters import IDENTIFIER, instant, integer, one_of
from processors.events.intake import json_object
from processors.runs.fix_patterns import RunError, run_errors
from stores.records import FoundRecord
from stores.runs import UNFINISHED, LedgerEntry, RunQuery
from stores.runs import RunSummary as RunRow
from streams.api.auth import granted_namespace
from streams.api.pages import Pages
from streams.api.params import NAMESPACE_PARAMS, NO_PARAMS, Param, Params, optional, repeated, value
from streams.api.publishing import POST, EventGate, answering, permitted, producer_of
from streams.plumbing.runtime import Runtime

# Runs listed per request, by default and at most.
RUNS_LIMIT = 50
MAX_RUNS_LIMIT = 500
# A run's events shown with it, the first ones: a long run's ledger can hold thousands.
EVENTS_SHOWN = 500
RUN_STATUSES = frozenset({*get_args(RunStatus), UNFINISHED})
STATUS = one_of(RUN_STATUSES)
LIMIT = integer(1, MAX_RUNS_LIMIT)
RUNS_PARAMS: Params = {**NAMESPACE_PARAMS, "status": Param(STATUS, repeats=True),
                       "agent": Param(IDENTIFIER), "since": Param(instant),
                       "limit": Param(LIMIT)}
RUN_PARAMS: Params = {**NAMESPACE_PARAMS, "run_id": Param(IDENTIFIER)}


def wire_runs(pages: Pages, runtime: Runtime) -> None:
    gate = EventGate(runtime.producer, runtime.max_event_bytes)

    # The first route that matches a path serves it, whatever the method: the run events'
    # before /v1/runs/{run_id}.
    @pages.page("/v1/runs/events", params=NO_PARAMS, methods=POST, answer=RunEventAccepted,
                body=event_body("RunEventBody", list(RUN_EVENT_TYPES.values())))
    @answering
    async def run_event_view(web: View, request: Request, caller: Caller) -> RunEventAccepted:
        """Publish a run event (202: published, not applied yet)."""
        body = json_object(await request.read(), runtime.max_event_bytes)
        permitted(caller, body, "write")
        raw, parsed = gate.checked(run_fields(body, caller), RUN_EVENT_TYPES)
        published = await gate.publish(raw, parsed.event)
        return RunEventAccepted(event_id=published.event_id,
                                run_id=parsed.event.payload.run_id)

    @pages.page("/v1/runs", params=RUNS_PARAMS, answer=RunList)
    async def runs_view(web: View, request: Request, caller: Caller) -> RunList:
        """The namespace's runs, newest first."""
        namespace = granted_namespace(caller, request.query)
        query = run_query(request.query)
        # One more than asked tells whether the list was cut.
        found = await runtime.stores.runs.runs(
            namespace, RunQuery(query.limit + 1, query.statuses, query.agent, query.since))
        return RunList(namespace=namespace, truncated=len(found) > query.limit,
                       runs=[summary_answer(summary) for summary in found[:query.limit]])

    @pages.page("/v1/runs/{run_id}", params=RUN_PARAMS, answer=RunHistory)
    async def run_view(web: View, request: Request, caller: Caller,
                       run_id: str) -> RunHistory | Response:
        """A run with its ledger, digest, errors and the fix patterns it fixed."""
        namespace = granted_namespace(caller, request.query)
        shown = await run_history(runtime, caller, namespace, run_id)
        if shown is None:
            return web.json({"error": f"no run {run_id!r} in {namespace!r}"}, status=404)
        return shown


def run_query(params: Mapping[str, str]) -> RunQuery:
    """The listing a request asks for: `status` (repeated or comma-separated), `agent`,
    `since` (ISO 8601), `limit`."""
    return RunQuery(
        limit=value(params, "limit", LIMIT, RUNS_LIMIT),
        statuses=tuple(repeated(params, "status", STATUS)),
        agent=optional(params, "agent", IDENTIFIER),
        since=optional(params, "since", instant),
    )


async def run_history(runtime: Runtime, caller: Caller, namespace: str,
                      run_id: str) -> RunHistory | None:
    """The run, its first EVENTS_SHOWN events, its digest, the errors it met (each with its
    fix pattern and the runs that fixed it) and the fix patterns it fixed; None when the
    namespace has no such run."""
    stores = runtime.stores
    summary, ledger, occurrences, fixed_ids = await asyncio.gather(
        stores.runs.run(namespace, run_id), stores.runs.run_ledger(namespace, run_id),
        stores.fix_patterns.run_occurrences(namespace, run_id),
        stores.fix_patterns.patterns_fixed_by(namespace, run_id))
    if summary is None:
        return None
    errors = run_errors(occurrences)
    digest_id = digest_record_id(namespace, run_id)
    pattern_ids = [fix_pattern_record_id(namespace, error.signature.signature_id)
                   for error in errors]
    found = await stores.records.records_by_id(namespace, [digest_id, *pattern_ids,
                                                           *fixed_ids])
    visible = {record_id: record for record_id, record in found.items()
               if caller.sees(record.scope, record.agent_id)}
    digest = visible.get(digest_id)
    return RunHistory(
        namespace=namespace,
        run=summary_answer(summary),
        events=[event_answer(entry) for entry in ledger[:EVENTS_SHOWN]],
        digest=None if digest is None else digest_answer(digest),
        errors=[error_answer(error, visible.get(pattern_id))
                for error, pattern_id in zip(errors, pattern_ids, strict=True)],
        fixed=[fixed for fixed in (fixed_answer(visible[pattern_id], run_id)
                                   for pattern_id in fixed_ids if pattern_id in visible)
               if fixed is not None],
    )


def summary_answer(run: RunRow) -> RunSummary:
    return RunSummary(run_id=run.run_id, status=run.status, task_key=run.task_key,
                      repo=run.repo, agent=run.agent, intent=run.intent,
                      started_at=run.started_at, finished_at=run.finished_at,
                      event_count=run.event_count, error_count=run.error_count)


def digest_answer(digest: FoundRecord) -> RunDigest:
    return RunDigest(record_id=digest.record_id, title=digest.title, text=digest.text,
                     version=digest.version, review_state=digest.review_state,
                     body=dict(digest.body))


def event_answer(entry: LedgerEntry) -> RunEvent:
    return RunEvent(event_id=entry.event_id, type=entry.type, occurred_at=entry.occurred_at,
                    producer=entry.producer, payload=entry.payload)


def error_answer(error: RunError, pattern: FoundRecord | None) -> RunErrorAnswer:
    signature = error.signature
    return RunErrorAnswer(
        signature_id=signature.signature_id, dialect=signature.dialect,
        exception_type=signature.exception_type, template=signature.template,
        frames=list(signature.frames), count=error.count, first_seen=error.first_seen,
        example=error.example,
        fix_pattern=None if pattern is None else ErrorFixPattern(
            record_id=pattern.record_id, title=pattern.title, text=pattern.text,
            version=pattern.version, review_state=pattern.review_state,
            occurrences=pattern.body.get("occurrences"),
            fixes=pattern.body.get("fixes", []),
            success_count=pattern.body.get("success_count", 0)))


def fixed_answer(pattern: FoundRecord, run_id: str) -> FixedPattern | None:
    """The pattern as one the run fixed; None if a rebuild since it was found dropped the
    run from its fixes."""
    fix = next((fix for fix in pattern.body.get("fixes", []) if fix.get("run_id") == run_id),
               None)
    if fix is None:
        return None
    return FixedPattern(record_id=pattern.record_id, title=pattern.title,
                        signature_id=pattern.body.get("signature_id"),
                        after_runs=fix.get("after_runs", []))


def run_fields(body: dict[str, Any], caller: Caller) -> dict[str, Any]:
    """A run event as posted, with its producer from the key; `occurred_at` may be given (an
    orchestrator posting events it buffered), and a bound key starts runs as its agent."""
    document = {**body, "event_id": body.get("event_id") or uuid.uuid4().hex,
                "occurred_at": body.get("occurred_at") or datetime.now(UTC).isoformat(),
                "producer": producer_of(caller)}
    payload = document.get("payload")
    if document.get("type") == "run.started" and isinstance(payload, dict):
        agent = caller.writer_for(payload.get("agent") or None)
        if agent is not None:
            document["payload"] = {**payload, "agent": agent}
    return document
