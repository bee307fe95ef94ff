"""`runs.events` → the run ledger in Postgres → on run.finished, a run digest → the record
sink → `memory.updated`; errors met → signatures → fix patterns, rebuilt when an error
recurs or a run that may have fixed one succeeds; then the lessons and patterns they teach,
published to `memory.events` as draft memories (streams/stages/runs/learnings.py); and what
the run does to its planning item, published to `planning.events`
(streams/stages/runs/planning.py).

Every step that touches a store isolates the events at fault: a ledger row, an error
occurrence, a digest or a fix pattern that is refused dead-letters the event that made it,
and the rest of the batch is stored.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from memstream_client.events import RUN_EVENT_TYPES, Provenance, RunEvent, RunFinished, RunStarted
from memstream_client.ids import digest_record_id
from processors.events.errors import Rejection, Unexpected
from processors.runs.digests import build_digest, digest_record
from processors.runs.fix_patterns import ErrorOccurrence, error_occurrences
from schemas.records import Record
from schemas.topics import RUNS_EVENTS
from stores.runs import RunEventRow
from streams.plumbing.dead_letters import send_dead_letters
from streams.plumbing.llm_hook import digest_prose
from streams.plumbing.messages import InboundMessage
from streams.plumbing.runtime import Runtime
from streams.stages.embedding import embedded, start_embedding
from streams.stages.parsing import ParsedBatch, parse_batch
from streams.stages.record_sink import RecordChange, RecordSink
from streams.stages.runs.fix_pattern_refresh import FixPatternKey, refresh_fix_patterns
from streams.stages.runs.learnings import propose_lessons, propose_patterns
from streams.stages.runs.planning import publish_planning

Dead = list[tuple[InboundMessage, Rejection]]


@dataclass(frozen=True)
class _Finished:
    message: InboundMessage
    event: RunFinished
    provenance: Provenance


class RunLedger:
    """Both stages in order: the ledger lookups of a batch must see the previous batch."""

    def __init__(self, runtime: Runtime, sink: RecordSink) -> None:
        self._runtime = runtime
        self._sink = sink
        self._attempts = runtime.attempts(RUNS_EVENTS)

    async def prepare(self, messages: Sequence[InboundMessage]
                      ) -> ParsedBatch[RunEvent]:
        return parse_batch(self._runtime, messages, RUN_EVENT_TYPES)

    async def complete(self, batch: ParsedBatch[RunEvent]) -> None:
        runtime, attempts = self._runtime, self._attempts
        metrics = runtime.metrics
        dead = list(batch.rejected)

        runs = {(p.event.namespace, p.event.payload.run_id) for _, p in batch.parsed}
        started = await attempts.until_done(lambda: runtime.stores.runs.started_runs(runs),
                                            what="ledger lookup")
        rows: list[tuple[InboundMessage, RunEventRow]] = []
        finished: list[_Finished] = []
        occurrences: list[tuple[InboundMessage, ErrorOccurrence]] = []
        for message, parsed in batch.parsed:
            event = parsed.event
            run = (event.namespace, event.payload.run_id)
            if isinstance(event, RunStarted):
                started.add(run)
            elif run not in started:
                dead.append((message, Rejection(
                    "broken_reference",
                    f"{event.type} for run {run[1]!r} in namespace {run[0]!r}, which never "
                    "started",
                )))
                continue
            provenance = message.provenance(event.event_id, event.producer)
            try:
                met = error_occurrences(event, provenance)
            except Exception as exc:  # a pure step: the same answer every time
                dead.append((message, Unexpected.of(exc).rejection))
                continue
            rows.append((message, RunEventRow(
                event_id=event.event_id, namespace=event.namespace, run_id=run[1],
                type=event.type, occurred_at=event.occurred_at, producer=event.producer,
                payload=event.payload.model_dump(mode="json"), provenance=provenance,
                sanitized=dict(parsed.sanitized),
            )))
            for name, count in parsed.sanitized.items():
                metrics.sanitized.labels(RUNS_EVENTS, name).inc(count)
            if isinstance(event, RunFinished):
                finished.append(_Finished(message, event, provenance))
            occurrences.extend((message, occurrence) for occurrence in met)

        stores = runtime.stores
        with runtime.stage("postgres"):
            ledger = await attempts.isolating(
                rows, lambda part: stores.runs.append_run_events([r for _, r in part]),
                what="ledger append")
            appended = await attempts.isolating(
                occurrences,
                lambda part: stores.fix_patterns.append_error_occurrences([o for _, o in part]),
                what="error occurrences")
        dead += [(message, error.rejection) for (message, _), error in ledger.failed]
        dead += [(message, error.rejection) for (message, _), error in appended.failed]
        refused = {message for message, _ in dead}
        for _, row in ledger.done:
            metrics.events.labels(RUNS_EVENTS, row.type, "stored").inc()
        for _, occurrence in appended.done:
            metrics.error_occurrences.labels(occurrence.signature.dialect).inc()
        # A run's planning item (docs/planning.md): claimed, closed, its follow-ups filed.
        events = {message: parsed.event for message, parsed in batch.parsed}
        await publish_planning(runtime, attempts, [events[message] for message, _ in ledger.done])

        ended = [end for end in finished if end.message not in refused]
        digests_refused = await self._store_digests(ended)
        dead += digests_refused
        # Digests first: a fix pattern shows what its fixing runs changed, from their digests.
        refreshed = await refresh_fix_patterns(
            runtime, self._sink, attempts,
            await self._fix_pattern_keys([item for item in appended.done], ended))
        dead += refreshed.refused
        # Learnings last: they are drawn from the digests and fix patterns stored above. Every
        # finished run is looked at, a replayed one too, so a learning a crash kept from being
        # published is published then.
        dead += await propose_lessons(runtime, attempts, refreshed.changed)
        without_digest = {message for message, _ in digests_refused}
        dead += await propose_patterns(runtime, attempts, {
            (end.event.namespace, end.event.payload.run_id): end.message
            for end in ended if end.message not in without_digest})
        await send_dead_letters(runtime, dead)

    async def _store_digests(self, finished: Sequence[_Finished]) -> Dead:
        """A digest per finished run not announced yet, built from its whole ledger (this
        batch included). A replayed run.finished whose digest is out already costs no ledger
        read and no LLM call."""
        announced = await self._attempts.until_done(
            lambda: self._runtime.stores.records.announced_record_ids(
                digest_record_id(end.event.namespace, end.event.payload.run_id)
                for end in finished),
            what="replay check")
        todo = [end for end in finished if digest_record_id(
            end.event.namespace, end.event.payload.run_id) not in announced]
        built: list[tuple[InboundMessage, Record]] = []

        async def build(part: Sequence[_Finished]) -> None:
            built.extend([(end.message, await self._digest(end)) for end in part])

        digests = await self._attempts.isolating(todo, build, what="digest build")
        dead: Dead = [(end.message, error.rejection) for end, error in digests.failed]
        vectors, refused = await embedded(
            self._runtime, self._attempts, built,
            start_embedding(self._runtime, [record for _, record in built]))
        stored = await self._sink.store_new(
            [RecordChange(record, "created", 1, vector, (message,))
             for (message, record), vector in vectors],
            self._attempts)
        return dead + refused + [(change.sources[0], error.rejection)
                                 for change, error in stored.failed]

    async def _digest(self, end: _Finished) -> Record:
        runtime = self._runtime
        ledger = await runtime.stores.runs.run_ledger(end.event.namespace,
                                                      end.event.payload.run_id)
        events = [RUN_EVENT_TYPES[entry.type].model_validate(entry, from_attributes=True)
                  for entry in ledger]
        digest = build_digest(events)
        prose = await digest_prose(runtime.llm, digest, runtime.metrics)
        return digest_record(digest, end.provenance, rewritten=prose)

    async def _fix_pattern_keys(
        self, occurrences: Sequence[tuple[InboundMessage, ErrorOccurrence]],
        finished: Sequence[_Finished],
    ) -> dict[FixPatternKey, tuple[InboundMessage, ...]]:
        """The fix patterns to rebuild, each with the events that call for it: the errors
        met, and the succeeded runs that may have fixed an error."""
        keys: defaultdict[FixPatternKey, list[InboundMessage]] = defaultdict(list)
        for message, occurrence in occurrences:
            keys[(occurrence.namespace, occurrence.signature.signature_id)].append(message)
        succeeded = [end for end in finished if end.event.payload.status == "succeeded"]
        for end in succeeded:
            fixable = await self._attempts.until_done(
                partial(self._runtime.stores.fix_patterns.signatures_fixable_by,
                        [(end.event.namespace, end.event.payload.run_id)],
                        self._runtime.fix_window),
                what="fixable signatures")
            for key in fixable:
                keys[key].append(end.message)
        return {key: tuple(dict.fromkeys(messages)) for key, messages in keys.items()}
