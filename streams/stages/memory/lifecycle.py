"""`memory.update`, `memory.deprecate`, `memory.review`, `memory.restore` → a new version of
the record → the record sink → `memory.updated`; `memory.block` edits go to
streams/stages/memory/blocks.py, `memory.rate` ratings to streams/stages/memory/ratings.py and
`memory.scoring` changes to streams/stages/memory/scoring_config.py, in the same order.

Lifecycle events are applied one at a time, in the order of their partition (memory events
are keyed by namespace, so every change of a record comes in order): read what the rules
need, ask them (processors/memory/lifecycle.py), embed again if the text changed, store the outcome
with the event id in one transaction, then index and announce it through the sink. An event
found applied is a replay: nothing changes, and its announcement is made only if it may be
missing. An event the rules refuse is dead-lettered with their reason.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from datetime import datetime
from functools import partial

from memstream_client.events import (
    ChangeKind,
    LifecycleEvent,
    MemoryBlock,
    MemoryRate,
    MemoryRestore,
    MemoryReview,
    MemoryScoring,
    MemoryUpdate,
)
from memstream_client.ids import invalidation_event_id
from processors.events.errors import MemstreamError, Rejected
from processors.events.intake import Parsed
from processors.knowledge.stale_facts import Invalidation
from processors.memory.lifecycle import (
    Facts,
    OutcomeKind,
    Protection,
    invalidated,
    outcome_of,
    record_id_of,
    restated,
)
from processors.memory.tiers import TierRules
from processors.memory.twins import Twin
from processors.recall.as_of import LEAVING_CHANGES
from processors.text.embedding import Vector, embedding_text
from schemas.records import Record
from schemas.topics import MEMORY_EVENTS
from stores.record_versions import AppliedEvent, ChangedRecord, StoredCurrent
from streams.plumbing.dead_letters import send_dead_letters
from streams.plumbing.messages import InboundMessage
from streams.plumbing.runtime import Runtime
from streams.stages.memory.blocks import BlockEditor
from streams.stages.memory.ratings import RatingApplier
from streams.stages.memory.scoring_config import ScoringConfigApplier
from streams.stages.record_sink import RecordChange, RecordSink

# The events of memory.events other than writes, applied one at a time in their order.
Applied = LifecycleEvent | MemoryBlock | MemoryRate | MemoryScoring
Lifecycle = tuple[InboundMessage, Parsed[Applied]]


class LifecycleApplier:
    def __init__(self, runtime: Runtime, sink: RecordSink, protect: Collection[Protection],
                 tiers: TierRules, block_max_chars: int) -> None:
        self._runtime = runtime
        self._sink = sink
        self._versions = runtime.stores.versions
        self._protect = protect
        self._tiers = tiers
        self._attempts = runtime.attempts(MEMORY_EVENTS)
        self._blocks = BlockEditor(runtime, sink, runtime.stores.blocks, block_max_chars,
                                   self._attempts, protected="core_blocks" in protect)
        self._ratings = RatingApplier(runtime)
        self._scoring = ScoringConfigApplier(runtime)

    async def apply(self, items: Sequence[Lifecycle]) -> None:
        events = self._runtime.metrics.events
        for message, parsed in items:
            event = parsed.event
            step = self._step(message, parsed)
            try:
                outcome = await self._attempts.until_done(step, what=f"applying {event.type}")
            except MemstreamError as error:
                await send_dead_letters(self._runtime, [(message, error.rejection)])
                continue
            events.labels(MEMORY_EVENTS, parsed.event.type, outcome).inc()

    def _step(self, message: InboundMessage,
              parsed: Parsed[Applied]) -> Callable[[], Awaitable[str]]:
        """What applies the event: ratings go to the rating applier, scoring changes to the
        scoring config, block edits and reviews of a block's diffs to the block editor, the
        rest change records."""
        event = parsed.event
        if isinstance(event, MemoryRate):
            return partial(self._ratings.apply_one, event)
        if isinstance(event, MemoryScoring):
            return partial(self._scoring.apply_one, event)
        if isinstance(event, MemoryBlock):
            return partial(self._blocks.apply_one, message, Parsed(event, parsed.sanitized))
        if isinstance(event, MemoryReview) and event.payload.block is not None \
                and event.payload.diff_id is not None:
            return partial(self._blocks.review, message, Parsed(event, parsed.sanitized),
                           event.payload.block, event.payload.diff_id)
        return partial(self._apply_one, message, Parsed(event, parsed.sanitized))

    async def _apply_one(self, message: InboundMessage,
                         parsed: Parsed[LifecycleEvent]) -> OutcomeKind | str:
        event = parsed.event
        applied = await self._versions.applied(event.event_id)
        if applied is not None:
            if not applied.announced and applied.change is not None:
                await self._announce_again(message, event.event_id, event.namespace, applied,
                                           applied.change)
            return "duplicate"
        record_id = record_id_of(event)
        stored = await self._versions.current(event.namespace, record_id)
        if stored is None:
            raise Rejected("broken_reference", f"no record {record_id} in "
                           f"namespace {event.namespace!r}")
        outcome = outcome_of(event, await self._facts(event, stored), self._protect,
                             parsed.sanitized, self._tiers)
        vector = stored.vector
        if outcome.reembed or vector is None:
            vector = await self._embedded(outcome.record)
        saved = await self._versions.save(
            event.event_id, event.type, stored.current.version, outcome,
            vector if outcome.new_version else None)
        if outcome.change == "unchanged":
            return outcome.change
        # Every version announced, each with the record as the event left it (a promotion
        # is a version of its own); or, for a proposal or a rejected diff, the record as is.
        changed = [ChangedRecord(saved.record, change, version, vector)
                   for change, version in saved.versions] or \
            [ChangedRecord(saved.record, outcome.change, saved.version, vector)]
        await self._publish([*changed, *(ChangedRecord(member, "superseded", version, None)
                                         for member, version in saved.superseded)],
                            message, event.event_id)
        return outcome.change

    async def folded(self, event_ids: Sequence[str]) -> set[str]:
        """The writes among these that an earlier try folded into their twins."""
        return await self._versions.applied_ids(event_ids)

    async def fold_into_twin(self, message: InboundMessage, write: Record,
                             twin: Twin | None) -> None:
        """Apply a write that restates a stored memory as a version of that memory: once,
        by the write's event id (`twin` None: an earlier try did, and this one finishes
        it); refused if the twin is gone meanwhile."""
        event_id = write.provenance.source_event_id
        applied = await self._versions.applied(event_id)
        if applied is not None:
            if not applied.announced and applied.change is not None:
                await self._announce_again(message, event_id, write.namespace, applied,
                                           applied.change)
            return
        if twin is None:
            raise Rejected("internal_error", f"write {event_id} was folded by an earlier "
                           "try, which left no trace")
        stored = await self._versions.current(write.namespace, twin.record_id)
        if stored is None:
            raise Rejected("broken_reference", f"the twin {twin.record_id} of the write "
                           f"is not in namespace {write.namespace!r}")
        outcome = restated(stored.current, write, twin.cosine)
        saved = await self._versions.save(event_id, "memory.write", stored.current.version,
                                          outcome, None)
        vector = stored.vector if stored.vector is not None else \
            await self._embedded(saved.record)
        await self._publish([ChangedRecord(saved.record, change, version, vector)
                             for change, version in saved.versions], message, event_id)

    async def invalidate(self, newer: Record, found: Invalidation) -> None:
        """Apply what a new memory found stale (streams/stages/knowledge/stale_facts.py): the older
        memory it restates with another value leaves recall as a version of its own, or waits
        for review when protected; once, by an id derived from the write and the older
        memory. A memory gone meanwhile (merged, invalidated by another) is left as it is."""
        message = None
        event_id = invalidation_event_id(newer.provenance.source_event_id, found.older_id)
        applied = await self._versions.applied(event_id)
        if applied is not None:
            if not applied.announced and applied.change is not None:
                await self._announce_again(message, event_id, newer.namespace, applied,
                                           applied.change)
            return
        stored = await self._versions.current(newer.namespace, found.older_id)
        if stored is None or stored.current.superseded_by is not None \
                or stored.current.record.invalidated_by is not None:
            return
        outcome = invalidated(stored.current, newer, found.detail, event_id, self._protect)
        saved = await self._versions.save(event_id, "memory.write", stored.current.version,
                                          outcome, None)
        if outcome.change == "unchanged":
            return
        changed = [ChangedRecord(saved.record, change, version, stored.vector)
                   for change, version in saved.versions] or \
            [ChangedRecord(saved.record, outcome.change, saved.version, stored.vector)]
        await self._publish(changed, message, event_id)

    async def _facts(self, event: LifecycleEvent, stored: StoredCurrent) -> Facts:
        namespace, record_id = event.namespace, record_id_of(event)
        current, updates = stored.current, stored.updates
        if isinstance(event, MemoryUpdate) and event.payload.related_ids:
            known = await self._runtime.stores.records.existing_record_ids(
                namespace, event.payload.related_ids)
            return Facts(current, known_ids=known, updates=updates)
        if isinstance(event, MemoryRestore):
            return Facts(current, version=await self._versions.version(
                namespace, record_id, event.payload.version))
        if isinstance(event, MemoryReview) and event.payload.diff_id is not None:
            return Facts(current, updates=updates, diff=await self._versions.pending_diff(
                namespace, event.payload.diff_id))
        return Facts(current, updates=updates)

    async def _embedded(self, record: Record) -> Vector:
        with self._runtime.stage("embed"):
            vectors = await self._runtime.embed([embedding_text(record.title, record.text)],
                                                role="passage")
        vector: Vector = vectors[0]
        return vector

    async def _announce_again(self, message: InboundMessage | None, event_id: str,
                              namespace: str, applied: AppliedEvent,
                              change: ChangeKind) -> None:
        """Complete an event applied by an earlier try that may not have announced it: the
        records it gave a version, or (a proposal, a rejected diff) the record as it is."""
        changed = await self._versions.changed_by(event_id)
        if not changed:
            stored = await self._versions.current(namespace, applied.record_id)
            if stored is None:
                return
            changed = [ChangedRecord(stored.current.record, change, applied.version,
                                     stored.vector)]
        await self._publish(changed, message, event_id, since=applied.applied_at)

    async def _publish(self, changed: Sequence[ChangedRecord], message: InboundMessage | None,
                       event_id: str, since: datetime | None = None) -> None:
        """Index and announce what the event changed, then mark the event announced. A
        record that keeps its place in the index needs its vector."""
        changes = []
        for item in changed:
            # A record out of force leaves the index; any other needs its vector there.
            vector = None if item.change in LEAVING_CHANGES else item.vector
            if vector is None and item.change not in LEAVING_CHANGES:
                vector = await self._embedded(item.record)
            # A change no consumed event caused (a stale fact found on a timer) has no event
            # to dead-letter.
            changes.append(RecordChange(item.record, item.change, item.version, vector,
                                        () if message is None else (message,),
                                        maybe_announced_since=since, cause_event_id=event_id))
        published = await self._sink.publish(changes, self._attempts)
        if published.failed:
            _, error = published.failed[0]
            raise error
        await self._attempts.until_done(partial(self._versions.mark_announced, event_id),
                                        what="marking a lifecycle event announced")
