"""`memory.consolidate` → the namespace's live memories → clusters merged → one Postgres
transaction holding the replacements, the superseded members and a maintenance report.

It runs in a process of its own (`python -m streams.worker --role consolidator`, its own
consumer group): HDBSCAN holds the GIL for seconds, which must not stall the writes. It needs
Postgres and the model, not the index: the worker that owns the index publishes each report
(streams/stages/consolidation/report_relay.py), as it would any record change.

A request's event_id names its report: a re-delivered request finds the report and changes
nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial

import numpy as np

from memstream_client.events import CONSOLIDATE_EVENT_TYPES, ConsolidateRequest, Provenance
from processors.consolidation.candidates import ConsolidationSettings
from processors.consolidation.plan import (
    ConsolidationPlan,
    merged_record,
    plan_consolidation,
    report_clusters,
)
from processors.consolidation.trigger import RunOutcome, skip_reason
from processors.events.errors import MemstreamError
from processors.text.embedding import Vector, embedding_text
from schemas.records import Record
from schemas.topics import MEMORY_CONSOLIDATE
from stores.consolidations import Consolidations, NewReport
from streams.plumbing.dead_letters import send_dead_letters
from streams.plumbing.llm_hook import merge_prose
from streams.plumbing.messages import InboundMessage
from streams.plumbing.runtime import Runtime
from streams.stages.parsing import ParsedBatch, parse_batch

Embed = Callable[[Sequence[str]], Awaitable[Vector]]


@dataclass(frozen=True)
class PlannedConsolidation:
    """A plan with the records and vectors it was made from."""

    records: dict[str, Record]
    # The retrieval model's vectors, the index's.
    vectors: dict[str, Vector]
    plan: ConsolidationPlan
    # Records that had no usable vector and were embedded again.
    re_embedded: list[str]
    timings: dict[str, float] = field(default_factory=dict)


async def plan_namespace(consolidations: Consolidations, embed: Embed, judge: Embed,
                         namespace: str, settings: ConsolidationSettings,
                         dimension: int) -> PlannedConsolidation:
    """Load a namespace's live memories, embed those without a usable vector (`embed`: the
    retrieval model's), plan on the similarity model's vectors (`judge`) of the memories."""
    started = time.perf_counter()
    stored = await consolidations.live_memories(namespace)
    rejected = await consolidations.rejected_merges(namespace)
    loaded = time.perf_counter()
    missing = [record for record, vector in stored if not usable(vector, dimension)]
    fresh = dict(zip((record.record_id for record in missing),
                     await embed([embedding_text(r.title, r.text) for r in missing]),
                     strict=True))
    records = {record.record_id: record for record, _ in stored}
    vectors: dict[str, Vector] = {}
    for record, vector in stored:
        chosen = fresh.get(record.record_id, vector)
        assert chosen is not None  # a record without a usable vector was embedded again
        vectors[record.record_id] = chosen
    ordered = list(records.values())
    # The worker's judge (Runtime.similarity_vectors) embeds only texts it never judged; a
    # dry run's embeds them all, in memory.
    matrix = await judge([embedding_text(record.title, record.text) for record in ordered])
    embedded = time.perf_counter()
    # HDBSCAN holds the CPU for seconds on a large namespace; off the event loop, the
    # worker keeps heartbeating and serving meanwhile.
    plan = await asyncio.to_thread(partial(plan_consolidation, ordered, matrix, settings,
                                           rejected=rejected))
    clustered = time.perf_counter()
    timings = {
        "load": loaded - started,
        "embed": embedded - loaded,
        # Planning is clustering (reduce, HDBSCAN, guard) and merging.
        "cluster": clustered - embedded - plan.timings.get("merge", 0.0),
        "merge": plan.timings.get("merge", 0.0),
    }
    return PlannedConsolidation(records, vectors, plan, list(fresh), timings)


def usable(vector: Vector | None, dimension: int) -> bool:
    if vector is None or vector.shape != (dimension,):
        return False
    norm = float(np.linalg.norm(vector))
    return np.isfinite(norm) and norm > 0


class Consolidator:
    """The stages of the consolidator agent: one request at a time."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._attempts = runtime.attempts(MEMORY_CONSOLIDATE)

    async def prepare(self, messages: Sequence[InboundMessage]
                      ) -> ParsedBatch[ConsolidateRequest]:
        return parse_batch(self._runtime, messages, CONSOLIDATE_EVENT_TYPES)

    async def complete(self, parsed: ParsedBatch[ConsolidateRequest]) -> None:
        """Carry out each request (retried while the stores are away: its offset must not
        pass before); a request that fails for good is dead-lettered."""
        runtime = self._runtime
        dead = list(parsed.rejected)
        for message, request in ((message, event.event) for message, event in parsed.parsed):
            provenance = message.provenance(request.event_id, request.producer)
            try:
                outcome = await self._attempts.until_done(
                    partial(self.consolidate, request, provenance), what="consolidation")
            except MemstreamError as error:
                dead.append((message, error.rejection))
                continue
            runtime.metrics.consolidation_runs.labels(request.payload.reason, outcome).inc()
            runtime.metrics.events.labels(MEMORY_CONSOLIDATE, request.type, outcome).inc()
        await send_dead_letters(runtime, dead)

    async def consolidate(self, request: ConsolidateRequest,
                          provenance: Provenance) -> RunOutcome:
        runtime = self._runtime
        consolidations = runtime.stores.consolidations
        if await consolidations.report(request.event_id) is not None:
            return "already_done"
        if request.payload.reason == "new_memories":
            facts = await consolidations.facts(request.namespace)
            skip = skip_reason(reports_today=facts.reports_today,
                               new_since_report=facts.new_since_report,
                               rules=runtime.trigger_rules)
            if skip is not None:
                return skip

        started_at = datetime.now(UTC)
        started = time.perf_counter()
        planned = await plan_namespace(consolidations, partial(runtime.embed, role="passage"),
                                       runtime.similarity_vectors, request.namespace,
                                       runtime.consolidation, runtime.embedder.dimension)
        plan = planned.plan
        merges = []
        for merge in plan.merges:
            members = [planned.records[member] for member in merge.member_ids]
            medoid_first = sorted(members, key=lambda m: m.record_id != merge.medoid_id)
            rewritten = await merge_prose(runtime.llm, [m.text for m in medoid_first],
                                          runtime.metrics)
            merges.append(merged_record(merge, members, provenance, rewritten=rewritten,
                                        policy=runtime.derived_review))
        # A draft merge supersedes nothing yet: its members stay live until it is approved.
        drafts = {record.record_id for record in merges if record.review_state == "draft"}
        superseded = {member: by for member, by in plan.superseded.items() if by not in drafts}
        timings = dict(planned.timings)
        with _timed(timings, "embed"):
            merge_vectors = await runtime.embed(
                [embedding_text(record.title, record.text) for record in merges],
                role="passage")
        with _timed(timings, "store"):
            if planned.re_embedded:
                await runtime.stores.records.store_vectors(
                    [(record_id, planned.vectors[record_id]) for record_id in planned.re_embedded])
            applied = await consolidations.apply(
                NewReport(
                    report_id=request.event_id,
                    namespace=request.namespace,
                    reason=request.payload.reason,
                    started_at=started_at,
                    memories=plan.memories,
                    clusters=[{**cluster, "review_state": "draft" if cluster["new_id"]
                               in drafts else "approved"} for cluster in report_clusters(plan)],
                    merged_ids=sorted(superseded),
                    new_ids=[record.record_id for record in merges],
                    timings=timings,
                ),
                list(zip(merges, merge_vectors, strict=True)), superseded)
        if applied is None:
            return "already_done"
        timings["total"] = time.perf_counter() - started
        await consolidations.add_report_timings(
            request.event_id, {"store": timings["store"], "total": timings["total"]})
        metrics = runtime.metrics
        for phase, seconds in timings.items():
            metrics.consolidation_seconds.labels(phase).observe(seconds)
        metrics.consolidation_clusters.inc(len(plan.merges))
        metrics.consolidation_superseded.inc(len(applied))
        return "consolidated"


@contextmanager
def _timed(timings: dict[str, float], phase: str) -> Iterator[None]:
    started = time.perf_counter()
    yield
    timings[phase] = timings.get(phase, 0.0) + time.perf_counter() - started
