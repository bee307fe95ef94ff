"""What a run's events ask of its planning item (MEMORY_PLANNING=beads): a run.started with a
`planning_ref` claims the item; its run.finished closes it (or releases it) and files its
next steps as follow-ups. Published to `planning.events` under ids derived from the run event
(processors/planning/write_backs.py), so a replayed run event publishes the same events, which the
planning stage applies once. Runs of a repo no checkout is configured for ask nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from memstream_client.events import (
    RUN_EVENT_TYPES,
    PlanningWriteBack,
    RunEvent,
    RunFinished,
    RunStarted,
)
from processors.planning.write_backs import claim_of, finish_of
from schemas.topics import PLANNING_EVENTS, destination
from streams.plumbing.failures import Attempts
from streams.plumbing.messages import Outbound
from streams.plumbing.runtime import Runtime


async def publish_planning(runtime: Runtime, attempts: Attempts,
                           events: Sequence[RunEvent]) -> None:
    """The planning events of the run events stored (in the order given)."""
    if runtime.planning is None:
        return
    repos = set(runtime.planning.repos)
    started = {(e.namespace, e.payload.run_id): e for e in events if isinstance(e, RunStarted)}
    published: list[PlanningWriteBack] = []
    for event in events:
        if isinstance(event, RunStarted):
            claim = claim_of(event) if event.payload.repo in repos else None
            published += [claim] if claim is not None else []
        elif isinstance(event, RunFinished):
            key = (event.namespace, event.payload.run_id)
            start = started.get(key) or await _started(runtime, attempts, *key)
            if start is not None and start.payload.repo in repos:
                published += finish_of(start, event)
    outbound = [Outbound(*destination(event), event.model_dump_json().encode())
                for event in published]
    if outbound:
        await attempts.until_done(lambda: runtime.producer.produce(outbound),
                                  what="publishing planning write-backs")
        runtime.metrics.produced.labels(PLANNING_EVENTS).inc(len(outbound))


async def _started(runtime: Runtime, attempts: Attempts, namespace: str,
                   run_id: str) -> RunStarted | None:
    ledger = await attempts.until_done(
        lambda: runtime.stores.runs.run_ledger(namespace, run_id), what="run ledger")
    for entry in ledger:
        if entry.type == "run.started":
            event = RUN_EVENT_TYPES[entry.type].model_validate(entry, from_attributes=True)
            return event if isinstance(event, RunStarted) else None
    return None
