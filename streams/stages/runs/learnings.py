"""Run learnings: after a batch's digests and fix patterns are stored, the lessons and
patterns they now teach (processors/runs/learnings.py), published to `memory.events` as draft
memory writes, or as updates when their evidence grew, where the memory intake applies them
like any other write (store → index → announce) and the review queue lists them.

Each learning is named by what it is learnt from, and each update by the text it brings, so a
replayed batch publishes nothing when the memory already says what the rules say, and an event
published twice applies once. A learning that cannot be proposed dead-letters the events that
called for it, with why.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from functools import partial

from processors.events.errors import MemstreamError, Rejection
from processors.runs.fix_patterns import FixPattern
from processors.runs.learnings import (
    ProposedLearning,
    StoredLearning,
    learning_event,
    proposed_lesson,
    proposed_patterns,
    run_statements,
)
from schemas.topics import MEMORY_EVENTS, destination
from stores.records import FoundRecord
from streams.plumbing.failures import Attempts
from streams.plumbing.messages import InboundMessage, Outbound
from streams.plumbing.runtime import Runtime

Dead = list[tuple[InboundMessage, Rejection]]
# The latest digests of a task key its patterns are found in.
DIGESTS_PER_TASK = 200

Sourced = list[tuple[ProposedLearning, tuple[InboundMessage, ...]]]


async def propose_lessons(runtime: Runtime, attempts: Attempts,
                          changed: Sequence[tuple[FixPattern, tuple[InboundMessage, ...]]]
                          ) -> Dead:
    """The lessons of the fix patterns that changed, each called for by the events that
    changed its pattern."""
    lessons: Sourced = []
    for pattern, sources in changed:
        lesson = proposed_lesson(pattern, runtime.learnings)
        if lesson is not None:
            lessons.append((lesson, sources))
    return await publish_learnings(runtime, attempts, lessons)


async def propose_patterns(runtime: Runtime, attempts: Attempts,
                           finished: Mapping[tuple[str, str], InboundMessage]) -> Dead:
    """The patterns the finished runs (by namespace and run id) take part in, found among the
    digests of their task keys; each called for by the run.finished events of its runs."""
    by_namespace: defaultdict[str, dict[str, InboundMessage]] = defaultdict(dict)
    for (namespace, run_id), message in finished.items():
        by_namespace[namespace][run_id] = message
    patterns: Sourced = []
    dead: Dead = []
    for namespace, runs in sorted(by_namespace.items()):
        try:
            bodies = await attempts.until_done(
                partial(runtime.stores.records.task_digests, namespace, sorted(runs),
                        DIGESTS_PER_TASK),
                what="reading a task's digests")
        except MemstreamError as error:
            dead += [(message, error.rejection) for message in runs.values()]
            continue
        statements = [found for body in bodies if (found := run_statements(body))]
        for pattern in proposed_patterns(namespace, statements, runtime.learnings):
            sources = tuple(runs[run_id] for run_id in pattern.runs if run_id in runs)
            if sources:
                patterns.append((pattern, sources))
    return dead + await publish_learnings(runtime, attempts, patterns)


async def publish_learnings(runtime: Runtime, attempts: Attempts, learnings: Sourced) -> Dead:
    """Publish what brings each learning's memory to what the rules state now, namespace by
    namespace; nothing for those that say so already."""
    by_namespace: defaultdict[str, Sourced] = defaultdict(list)
    for learning, sources in learnings:
        by_namespace[learning.namespace].append((learning, sources))
    dead: Dead = []
    for namespace, proposed in sorted(by_namespace.items()):
        try:
            stored = await attempts.until_done(
                partial(runtime.stores.records.records_by_id, namespace,
                        sorted({learning.record_id for learning, _ in proposed})),
                what="reading run learnings")
            events = [event for learning, _ in proposed
                      if (event := learning_event(learning,
                                                  stored_learning(stored.get(learning.record_id))))]
            # Without the fields left unset: an update's absent field is no change, while an
            # explicit null reads as one (processors/memory/lifecycle.py sets what the event names).
            outbound = [Outbound(*destination(event),
                                 event.model_dump_json(exclude_none=True).encode())
                        for event in events]
            if outbound:
                await attempts.until_done(partial(runtime.producer.produce, outbound),
                                          what="publishing run learnings")
                runtime.metrics.produced.labels(MEMORY_EVENTS).inc(len(outbound))
        except MemstreamError as error:
            dead += [(message, error.rejection) for _, sources in proposed
                     for message in sources]
    return dead


def stored_learning(found: FoundRecord | None) -> StoredLearning | None:
    if found is None:
        return None
    return StoredLearning(version=found.version, review_state=found.review_state,
                          title=found.title, text=found.text, related_ids=found.related_ids)
