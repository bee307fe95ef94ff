"""Rebuild the fix patterns whose facts changed, then index and announce each new version.

A fix pattern is rebuilt whole from Postgres (its occurrences, the runs that met it, the
runs that may have fixed it) under its signature's lock, so workers on different partitions
agree, and a replay finds nothing changed and announces nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial

from memstream_client.events import ChangeKind
from processors.events.errors import MemstreamError, Rejection
from processors.runs.fix_patterns import FixPattern, build_fix_pattern, fix_pattern_record
from processors.text.embedding import Vector, embedding_text
from schemas.records import Record
from stores.fix_patterns import SavedVersion
from streams.plumbing.failures import Attempts
from streams.plumbing.messages import InboundMessage
from streams.plumbing.runtime import Runtime
from streams.stages.record_sink import RecordChange, RecordSink

# (namespace, signature_id)
FixPatternKey = tuple[str, str]


@dataclass
class Refreshed:
    """The events that called for a pattern that could not be rebuilt, with why; and each
    pattern given a new version, announced, with the events that called for it."""

    refused: list[tuple[InboundMessage, Rejection]] = field(default_factory=list)
    changed: list[tuple[FixPattern, tuple[InboundMessage, ...]]] = field(default_factory=list)


async def refresh_fix_patterns(
    runtime: Runtime, sink: RecordSink, attempts: Attempts,
    keys: Mapping[FixPatternKey, tuple[InboundMessage, ...]],
) -> Refreshed:
    """Rebuild the fix pattern of each (namespace, signature_id), in a stable order."""
    refreshed = Refreshed()
    refused = refreshed.refused
    for key in sorted(keys):
        sources = keys[key]
        try:
            saved = await attempts.until_done(partial(_rebuild, runtime, *key),
                                              what="rebuilding a fix pattern")
        except MemstreamError as error:
            refused += [(message, error.rejection) for message in sources]
            continue
        if saved is None:
            continue
        pattern, record, version = saved
        change: ChangeKind = "created" if version.version == 1 else "updated"
        published = await sink.publish(
            [RecordChange(record, change, version.version, version.vector, sources,
                          version.stored_before)],
            attempts)
        refused += [(message, error.rejection)
                    for failed, error in published.failed for message in failed.sources]
        if published.done:
            runtime.metrics.fix_pattern_versions.labels(change).inc()
            refreshed.changed.append((pattern, sources))
    return refreshed


async def _rebuild(
    runtime: Runtime, namespace: str, signature_id: str
) -> tuple[FixPattern, Record, SavedVersion] | None:
    async def embed(record: Record) -> Vector:
        vector: Vector = (await runtime.embed(
            [embedding_text(record.title, record.text)], role="passage"))[0]
        return vector

    async with runtime.stores.fix_patterns.session(namespace, signature_id) as session:
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
    return None if saved is None else (pattern, record, saved)
