"""`planning.events` → the planning kept in Postgres, and the write-back into repositories'
files (docs/planning.md).

- `planning.item_upserted`: the item as last read (a row whose content is unchanged is left
  as it is).
- `planning.claimed`, `planning.closed`, `planning.followup_discovered`: queued as pending
  write-backs, once by event id.
- `planning.sync_requested`: the repo's pending write-backs are written into its
  issues.jsonl the way bd writes it (processors/planning/beads.py), marked applied (or failed, for
  an item the file no longer holds), and the file is read back and its changed items published as
  upserts.

An event naming a repo no checkout is configured for is dead-lettered (`broken_reference`).
A sync that cannot read or write the file is logged and counted, and its write-backs stay
pending for the next sync: Beads failing never stops the stage.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime

from memstream_client.events import (
    PLANNING_EVENT_TYPES,
    PlanningEvent,
    PlanningItemUpserted,
    PlanningSyncRequested,
    PlanningSyncRequestedPayload,
)
from processors.events.errors import Rejection
from processors.planning.write_backs import change_of, content_hash, settle
from schemas.topics import PLANNING_EVENTS, destination
from stores.beads_repo import BeadsRepos, PlanningUnavailable
from stores.planning import PlanningItemRow, WriteBack
from streams.plumbing.dead_letters import send_dead_letters
from streams.plumbing.messages import InboundMessage, Outbound
from streams.plumbing.runtime import Runtime
from streams.reads.planning import changed_items, publish_read
from streams.stages.parsing import ParsedBatch, parse_batch

log = logging.getLogger(__name__)

Dead = list[tuple[InboundMessage, Rejection]]
TIMER_PRODUCER = "memstream-planning-timer"


class PlanningLedger:
    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._attempts = runtime.attempts(PLANNING_EVENTS)

    async def prepare(self, messages: Sequence[InboundMessage]
                      ) -> ParsedBatch[PlanningEvent]:
        return parse_batch(self._runtime, messages, PLANNING_EVENT_TYPES)

    async def complete(self, batch: ParsedBatch[PlanningEvent]) -> None:
        runtime, attempts = self._runtime, self._attempts
        dead = list(batch.rejected)
        items: list[tuple[InboundMessage, PlanningItemRow]] = []
        write_backs: list[tuple[InboundMessage, WriteBack]] = []
        syncs: dict[tuple[str, str], None] = {}
        repos = set(runtime.planning.repos) if runtime.planning is not None else set()
        for message, parsed in batch.parsed:
            event = parsed.event
            repo = event.payload.repo
            if repo not in repos:
                dead.append((message, Rejection(
                    "broken_reference",
                    f"{event.type} for repo {repo!r}, for which no checkout is configured "
                    "(MEMSTREAM_PLANNING_REPOS)" if runtime.planning is not None else
                    f"{event.type} while planning is off (MEMORY_PLANNING)")))
                continue
            for name, count in parsed.sanitized.items():
                runtime.metrics.sanitized.labels(PLANNING_EVENTS, name).inc(count)
            if isinstance(event, PlanningItemUpserted):
                fields = event.payload.item
                items.append((message, PlanningItemRow(
                    event.namespace, repo, event.payload.item_id, fields,
                    content_hash(fields), event.occurred_at, event.event_id)))
            elif isinstance(event, PlanningSyncRequested):
                syncs[(event.namespace, repo)] = None
            else:
                payload = event.payload.model_dump(mode="json")
                item_id = payload.get("item_id") or payload["from_item_id"]
                write_backs.append((message, WriteBack(
                    event.event_id, event.namespace, repo, item_id, event.type,
                    event.occurred_at, payload)))

        store = runtime.stores.planning
        with runtime.stage("postgres"):
            kept = await attempts.isolating(
                items, lambda part: store.upsert_items([row for _, row in part]),
                what="planning items")
            queued = await attempts.isolating(
                write_backs, lambda part: store.append_write_backs([row for _, row in part]),
                what="planning write-backs")
        dead += [(message, error.rejection) for (message, _), error in kept.failed]
        dead += [(message, error.rejection) for (message, _), error in queued.failed]
        runtime.metrics.events.labels(PLANNING_EVENTS, "planning.item_upserted",
                                      "stored").inc(len(kept.done))
        for _, write_back in queued.done:
            runtime.metrics.events.labels(PLANNING_EVENTS, write_back.type, "stored").inc()
        # After the write-backs of the batch: a sync asked for after a claim writes it.
        if runtime.planning is not None:
            for namespace, repo in syncs:
                await sync(runtime, runtime.planning, namespace, repo)
        await send_dead_letters(runtime, dead)


async def sync(runtime: Runtime, files: BeadsRepos, namespace: str, repo: str) -> None:
    """Write the repo's pending write-backs into its file, then publish what changed in it.
    Logged and counted, never raised: the write-backs stay pending for the next sync."""
    store, now = runtime.stores.planning, datetime.now(UTC)
    try:
        pending = await store.pending(namespace, repo)
        beads = await files.read(repo)
        settled = settle(beads, [(wb.event_id, change_of(wb.type, wb.payload, wb.occurred_at))
                                 for wb in pending])
        if settled.applied:
            await files.write(repo, settled.beads)
            await store.settle(settled.applied, "applied", now)
        for event_id, detail in settled.failed:
            await store.settle([event_id], "failed", now, detail)
        written = await files.read(repo)
        changed = await changed_items(runtime, namespace, repo, written)
    except PlanningUnavailable as exc:
        runtime.metrics.planning.labels("sync", "failed").inc()
        log.warning("planning: sync of %r in %r failed, left pending: %s", repo, namespace,
                    exc)
        return
    runtime.metrics.planning.labels("sync", "ok").inc()
    log.info("planning: synced %r in %r: %d written, %d failed, %d items changed", repo,
             namespace, len(settled.applied), len(settled.failed), len(changed))
    await publish_read(runtime, namespace, repo, changed)


async def request_syncs(runtime: Runtime) -> None:
    """The timer (MEMSTREAM_PLANNING_SYNC_S): a sync request for every configured repo with
    write-backs pending, through planning.events like any other."""
    if runtime.planning is None:
        return
    known = set(runtime.planning.repos)
    now = datetime.now(UTC)
    requests = [PlanningSyncRequested(
        event_id=f"sync-{namespace}-{repo}-{now.isoformat()}", namespace=namespace,
        occurred_at=now, producer=TIMER_PRODUCER, type="planning.sync_requested",
        payload=PlanningSyncRequestedPayload(repo=repo, requested_by=TIMER_PRODUCER))
        for namespace, repo in await runtime.stores.planning.pending_repos() if repo in known]
    if requests:
        await runtime.producer.produce([Outbound(*destination(request),
                                                 request.model_dump_json().encode())
                                        for request in requests])
        runtime.metrics.produced.labels(PLANNING_EVENTS).inc(len(requests))
