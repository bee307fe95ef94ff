"""Rebuild the fix patterns whose facts changed, then index and announce each new version.

A fix pattern is rebuilt whole from Postgres (its occurrences, the runs that met it, the
runs that may have fixed it) under its signature's lock, so workers on different partitions
agree, and a replay finds nothing changed and announces nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from processors.embedding_text import embedding_text
from processors.fix_patterns import build_fix_pattern, fix_pattern_record
from schemas.events import ChangeKind
from schemas.records import Record
from stores.index_payload import index_payload
from stores.repository import Vector
from stores.vector_index import IndexPoint
from streams.runtime import UPDATES_TOPIC, Runtime, announcement


async def refresh_fix_patterns(runtime: Runtime, keys: Iterable[tuple[str, str]]) -> None:
    """Rebuild the fix pattern of each (namespace, signature_id), in a stable order."""
    for namespace, signature_id in sorted(set(keys)):
        saved = await _rebuild(runtime, namespace, signature_id)
        if saved is None:
            continue
        record, version, vector = saved
        with runtime.stage("index"):
            await runtime.index.upsert(
                [IndexPoint(record.record_id, vector, index_payload(record.model_dump()))]
            )
        change: ChangeKind = "created" if version == 1 else "updated"
        with runtime.stage("announce"):
            await runtime.producer.produce([announcement(record, change, version)])
            await runtime.repository.mark_announced([record.record_id])
        runtime.metrics.fix_pattern_versions.labels(change).inc()
        runtime.metrics.produced.labels(UPDATES_TOPIC).inc()


async def _rebuild(
    runtime: Runtime, namespace: str, signature_id: str
) -> tuple[Record, int, Vector] | None:
    async def embed(record: Record) -> Vector:
        vector: Vector = (await runtime.embed([embedding_text(record.title, record.text)]))[0]
        return vector

    async with runtime.repository.fix_pattern_session(namespace, signature_id) as session:
        occurrences = await session.occurrences()
        if not occurrences:
            return None
        runs = await session.runs(sorted({o.run_id for o in occurrences}))
        succeeded = await session.succeeded_runs(
            task_keys=sorted({run.task_key for run in runs.values() if run.task_key}),
            repos=sorted({run.repo for run in runs.values() if run.repo and not run.task_key}),
            since=occurrences[0].occurred_at,
        )
        pattern = build_fix_pattern(occurrences, runs, succeeded, runtime.fix_window)
        record = fix_pattern_record(pattern)
        saved = await session.save(record, embed)
    if saved is None:
        return None
    version, vector = saved
    return record, version, vector
