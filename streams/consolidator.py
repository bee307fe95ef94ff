"""`memory.consolidate` → the namespace's live memories → clusters merged → one Postgres
transaction → index → `memory.updated` (merged, superseded) and a maintenance report.

A request's event_id names its report. A re-delivered request finds the report and changes
nothing; one that stopped between the transaction and the announcements finds the report
unannounced and finishes the index and the announcements (every step there is an
overwrite: deterministic point ids and change event ids).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from processors.consolidation import ConsolidationSettings
from processors.consolidation_plan import (
    ConsolidationPlan,
    merged_record,
    plan_consolidation,
    report_clusters,
)
from processors.consolidation_trigger import RunOutcome, skip_reason
from processors.embedding_text import embedding_text
from processors.intake import Rejected, parse_event
from schemas.events import CONSOLIDATE_EVENT_TYPES, ConsolidateRequest, Provenance
from schemas.records import Record
from stores.index_payload import index_payload
from stores.repository import Repository, Vector
from stores.vector_index import IndexPoint
from streams.llm_hook import merge_prose
from streams.messages import InboundMessage
from streams.runtime import UPDATES_TOPIC, Runtime, announcement, send_dead_letters, until_done

TOPIC = "memory.consolidate"

Embed = Callable[[Sequence[str]], Awaitable[Vector]]


@dataclass(frozen=True)
class PlannedConsolidation:
    """A plan with the records and vectors it was made from."""

    records: dict[str, Record]
    vectors: dict[str, Vector]
    plan: ConsolidationPlan
    # Records that had no usable vector and were embedded again.
    re_embedded: list[str]
    timings: dict[str, float] = field(default_factory=dict)


async def plan_namespace(repository: Repository, embed: Embed, namespace: str,
                         settings: ConsolidationSettings,
                         dimension: int) -> PlannedConsolidation:
    """Load a namespace's live memories, embed those without a usable vector, plan."""
    started = time.perf_counter()
    stored = await repository.live_memories(namespace)
    loaded = time.perf_counter()
    missing = [record for record, vector in stored if not usable(vector, dimension)]
    fresh = dict(zip((record.record_id for record in missing),
                     await embed([embedding_text(r.title, r.text) for r in missing]),
                     strict=True))
    embedded = time.perf_counter()
    records = {record.record_id: record for record, _ in stored}
    vectors: dict[str, Vector] = {}
    for record, vector in stored:
        chosen = fresh.get(record.record_id, vector)
        assert chosen is not None  # a record without a usable vector was embedded again
        vectors[record.record_id] = chosen
    ordered = list(records.values())
    matrix = (np.stack([vectors[record.record_id] for record in ordered]) if ordered
              else np.zeros((0, dimension), dtype=np.float32))
    # HDBSCAN holds the CPU for seconds on a large namespace; off the event loop, the
    # worker keeps heartbeating and serving meanwhile.
    plan = await asyncio.to_thread(plan_consolidation, ordered, matrix, settings)
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
    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    async def consolidate_message(self, message: InboundMessage) -> None:
        """One request off the topic: a bad one is dead-lettered, a good one carried out
        (retried until the stores accept it: its offset must not pass before)."""
        runtime = self._runtime
        try:
            request = parse_event(message.value, CONSOLIDATE_EVENT_TYPES,
                                  runtime.max_event_bytes)
        except Rejected as exc:
            await send_dead_letters(runtime, [(message, exc.rejection)])
            return
        provenance = message.provenance(request.event_id, request.producer)
        outcome = await until_done(lambda: self.consolidate(request, provenance),
                                   what="consolidation", topic=TOPIC, metrics=runtime.metrics)
        runtime.metrics.consolidation_runs.labels(request.payload.reason, outcome).inc()
        runtime.metrics.events.labels(TOPIC, request.type, outcome).inc()

    async def consolidate(self, request: ConsolidateRequest,
                          provenance: Provenance) -> RunOutcome:
        runtime = self._runtime
        repository = runtime.repository
        existing = await repository.maintenance_report(request.event_id)
        if existing is not None:
            if existing["announced_at"] is None:
                await self._publish(existing, provenance, {})
            return "already_done"
        if request.payload.reason == "new_memories":
            facts = await repository.consolidation_facts(request.namespace)
            skip = skip_reason(reports_today=facts.reports_today,
                               new_since_report=facts.new_since_report,
                               rules=runtime.trigger_rules)
            if skip is not None:
                return skip

        started_at = datetime.now(UTC)
        started = time.perf_counter()
        planned = await plan_namespace(repository, runtime.embed, request.namespace,
                                       runtime.consolidation, runtime.embedder.dimension)
        plan = planned.plan
        merges = []
        for merge in plan.merges:
            members = [planned.records[member] for member in merge.member_ids]
            medoid_first = sorted(members, key=lambda m: m.record_id != merge.medoid_id)
            rewritten = await merge_prose(runtime.llm, [m.text for m in medoid_first],
                                          runtime.metrics)
            merges.append(merged_record(merge, members, provenance, rewritten=rewritten))
        timings = dict(planned.timings)
        with _timed(timings, "embed"):
            merge_vectors = await runtime.embed(
                [embedding_text(record.title, record.text) for record in merges])
        with _timed(timings, "store"):
            if planned.re_embedded:
                await repository.store_vectors([(record_id, planned.vectors[record_id])
                                                for record_id in planned.re_embedded])
            applied = await repository.apply_consolidation(
                {
                    "report_id": request.event_id,
                    "namespace": request.namespace,
                    "reason": request.payload.reason,
                    "started_at": started_at,
                    "memories": plan.memories,
                    "clusters": report_clusters(plan),
                    "merged_ids": sorted(plan.superseded),
                    "new_ids": [record.record_id for record in merges],
                    "timings": timings,
                },
                list(zip(merges, merge_vectors, strict=True)), plan.superseded)
        if applied is None:
            return "already_done"
        saved = await repository.maintenance_report(request.event_id)
        assert saved is not None  # written by the transaction that just committed
        await self._publish(saved, provenance, timings)
        timings["total"] = time.perf_counter() - started
        metrics = runtime.metrics
        for phase, seconds in timings.items():
            metrics.consolidation_seconds.labels(phase).observe(seconds)
        metrics.consolidation_clusters.inc(len(plan.merges))
        metrics.consolidation_superseded.inc(len(applied))
        return "consolidated"

    async def _publish(self, report: dict[str, Any], provenance: Provenance,
                       timings: dict[str, float]) -> None:
        """Index the report's replacements, drop its superseded records from the index,
        announce both, and mark the report announced with the timings of these steps."""
        runtime = self._runtime
        namespace = report["namespace"]
        merged = await runtime.repository.stored_records(namespace, report["new_ids"])
        superseded = await runtime.repository.stored_records(namespace, report["merged_ids"])
        with _timed(timings, "index"):
            await runtime.index.upsert([
                IndexPoint(item.record.record_id, item.vector,
                           index_payload(item.record.model_dump()))
                for item in merged if item.superseded_by is None and item.vector is not None])
            await runtime.index.delete([item.record.record_id for item in superseded])
        with _timed(timings, "announce"):
            await runtime.producer.produce(
                [announcement(item.record, "merged") for item in merged]
                + [announcement(item.record.model_copy(update={"provenance": provenance}),
                                "superseded", item.version) for item in superseded])
        await runtime.repository.mark_report_announced(report["report_id"], timings)
        runtime.metrics.produced.labels(UPDATES_TOPIC).inc(len(merged) + len(superseded))


@contextmanager
def _timed(timings: dict[str, float], phase: str) -> Iterator[None]:
    started = time.perf_counter()
    yield
    timings[phase] = timings.get(phase, 0.0) + time.perf_counter() - started
