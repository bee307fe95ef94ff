"""`runs.events` → the run ledger in Postgres → on run.finished, a run digest → embed →
index → `memory.updated`; errors met → signatures → fix patterns, rebuilt when an error
recurs or a run that may have fixed one succeeds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from processors.digests import build_digest, digest_record
from processors.fix_patterns import ErrorOccurrence, error_occurrences
from processors.ids import digest_record_id
from processors.intake import Rejected, Rejection, parse_event
from schemas.events import RUN_EVENT_TYPES, Provenance, RunEvent, RunFinished, RunStarted
from schemas.records import Record
from stores.repository import RunEventRow
from streams.fix_pattern_refresh import refresh_fix_patterns
from streams.llm_hook import digest_prose
from streams.messages import InboundMessage
from streams.runtime import Runtime, persist_and_announce, send_dead_letters, until_done

TOPIC = "runs.events"


@dataclass(frozen=True)
class ParsedRunEvents:
    rejected: list[tuple[InboundMessage, Rejection]]
    parsed: list[tuple[InboundMessage, RunEvent]]


class RunLedger:
    """Both stages in order: the ledger lookups of a batch must see the previous batch."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    async def prepare(self, messages: Sequence[InboundMessage]) -> ParsedRunEvents:
        rejected: list[tuple[InboundMessage, Rejection]] = []
        parsed: list[tuple[InboundMessage, RunEvent]] = []
        with self._runtime.stage("validate"):
            for message in messages:
                try:
                    event = parse_event(
                        message.value, RUN_EVENT_TYPES, self._runtime.max_event_bytes)
                except Rejected as exc:
                    rejected.append((message, exc.rejection))
                    continue
                parsed.append((message, event))
        return ParsedRunEvents(rejected, parsed)

    async def complete(self, batch: ParsedRunEvents) -> None:
        await record_run_events(self._runtime, batch.rejected, batch.parsed)


async def record_run_events(
    runtime: Runtime,
    rejected: list[tuple[InboundMessage, Rejection]],
    parsed: list[tuple[InboundMessage, RunEvent]],
) -> None:
    metrics = runtime.metrics
    dead = list(rejected)

    runs = {(event.namespace, event.payload.run_id) for _, event in parsed}
    started = await until_done(
        lambda: runtime.repository.started_runs(runs), what="ledger lookup", topic=TOPIC,
        metrics=metrics,
    )
    rows: list[RunEventRow] = []
    finished: list[tuple[RunFinished, Provenance]] = []
    occurrences: list[ErrorOccurrence] = []
    for message, event in parsed:
        run = (event.namespace, event.payload.run_id)
        if isinstance(event, RunStarted):
            started.add(run)
        elif run not in started:
            dead.append((message, Rejection(
                "broken_reference",
                f"{event.type} for run {run[1]!r} in namespace {run[0]!r}, which never started",
            )))
            continue
        provenance = message.provenance(event.event_id, event.producer)
        rows.append(RunEventRow(
            event_id=event.event_id, namespace=event.namespace, run_id=event.payload.run_id,
            type=event.type, occurred_at=event.occurred_at, producer=event.producer,
            payload=event.payload.model_dump(mode="json"), provenance=provenance,
        ))
        if isinstance(event, RunFinished):
            finished.append((event, provenance))
        occurrences.extend(error_occurrences(event, provenance))

    await send_dead_letters(runtime, dead)
    if rows:
        with runtime.stage("postgres"):
            await until_done(
                lambda: runtime.repository.append_run_events(rows), what="ledger append",
                topic=TOPIC, metrics=metrics,
            )
        for row in rows:
            metrics.events.labels(TOPIC, row.type, "stored").inc()
    if occurrences:
        with runtime.stage("postgres"):
            await until_done(
                lambda: runtime.repository.append_error_occurrences(occurrences),
                what="error occurrences", topic=TOPIC, metrics=metrics,
            )
        for occurrence in occurrences:
            metrics.error_occurrences.labels(occurrence.signature.dialect).inc()
    if finished:
        digests = await until_done(
            lambda: _digests(runtime, finished), what="digest build", topic=TOPIC,
            metrics=metrics,
        )
        await until_done(
            lambda: persist_and_announce(runtime, digests), what="storing digests", topic=TOPIC,
            metrics=metrics,
        )
    # Digests first: a fix pattern shows what its fixing runs changed, from their digests.
    if occurrences or finished:
        await until_done(
            lambda: _refresh(runtime, occurrences, finished), what="fix patterns",
            topic=TOPIC, metrics=metrics,
        )


async def _refresh(
    runtime: Runtime,
    occurrences: Sequence[ErrorOccurrence],
    finished: Sequence[tuple[RunFinished, Provenance]],
) -> None:
    succeeded = [
        (end.namespace, end.payload.run_id)
        for end, _ in finished
        if end.payload.status == "succeeded"
    ]
    keys = {(o.namespace, o.signature.signature_id) for o in occurrences}
    keys |= await runtime.repository.signatures_fixable_by(succeeded, runtime.fix_window)
    await refresh_fix_patterns(runtime, keys)


async def _digests(
    runtime: Runtime, finished: Sequence[tuple[RunFinished, Provenance]]
) -> list[Record]:
    """A digest per finished run not announced yet, built from its whole ledger (this batch
    included). A replayed run.finished whose digest is out already costs no ledger read and
    no LLM call."""
    announced = await runtime.repository.announced_record_ids(
        digest_record_id(end.namespace, end.payload.run_id) for end, _ in finished
    )
    records = []
    for end, provenance in finished:
        if digest_record_id(end.namespace, end.payload.run_id) in announced:
            continue
        ledger = await runtime.repository.run_ledger(end.namespace, end.payload.run_id)
        events = [RUN_EVENT_TYPES[row["type"]].model_validate(row) for row in ledger]
        digest = build_digest(events)
        prose = await digest_prose(runtime.llm, digest, runtime.metrics)
        records.append(digest_record(digest, provenance, rewritten=prose))
    return records
