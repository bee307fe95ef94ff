"""Reading a repository's planning for a reader (a context pack, the planning routes): the
file as it is now, with the write-backs memstream has not written into it yet laid over it;
the items of the file that changed since memstream last read them are published to
`planning.events` as item upserts (named by their content, so re-reading an unchanged item
adds nothing). A file missing or corrupt is read as memstream last read it (Postgres), with
why (`planning_items`); a pack's planning section is the item, its blockers and its ready
siblings, each with its cost in the model's tokens (`planning_candidates`).

Beads failing never fails a run or a pack: a read that cannot be done raises
PlanningUnavailable, which callers name in `degraded`, and is counted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from datetime import UTC, datetime

import numpy as np

from processors.planning.beads import BeadsFile, WorkItem, blockers, is_ready, planning_context
from processors.planning.write_backs import change_of, content_hash, pack_entries, settle, upserted
from processors.recall.context_pack import Candidate
from processors.recall.ranking import age_in_days
from schemas.topics import PLANNING_EVENTS, destination
from stores.beads_repo import PlanningUnavailable, UnknownRepo
from streams.plumbing.messages import Outbound
from streams.plumbing.runtime import Runtime

log = logging.getLogger(__name__)


async def read_planning(runtime: Runtime, namespace: str, repo: str) -> BeadsFile:
    """The repo's items as the file holds them, with the pending write-backs applied (a
    claim not synced yet already shows); what changed in the file is published. Raises
    PlanningUnavailable, counted."""
    if runtime.planning is None:
        raise UnknownRepo(repo, "planning is off (MEMORY_PLANNING)")
    try:
        beads = await runtime.planning.read(repo)
        pending = await runtime.stores.planning.pending(namespace, repo)
    except PlanningUnavailable as exc:
        runtime.metrics.planning.labels("read", "failed").inc()
        log.warning("planning: %s", exc)
        raise
    runtime.metrics.planning.labels("read", "ok").inc()
    await publish_read(runtime, namespace, repo,
                       await changed_items(runtime, namespace, repo, beads))
    return settle(beads, [(wb.event_id, change_of(wb.type, wb.payload, wb.occurred_at))
                          for wb in pending]).beads


async def publish_read(runtime: Runtime, namespace: str, repo: str,
                       items: Iterable[WorkItem]) -> None:
    """Publish the items as read; a failure to publish is logged, never raised into a
    read."""
    now = datetime.now(UTC)
    outbound = [Outbound(*destination(event), event.model_dump_json().encode())
                for event in (upserted(namespace, repo, item, now)
                              for item in dict((item.id, item) for item in items).values())]
    if not outbound:
        return
    try:
        await runtime.producer.produce(outbound)
    except Exception:
        log.exception("planning: publishing %d items read of %r failed", len(outbound), repo)
        return
    runtime.metrics.produced.labels(PLANNING_EVENTS).inc(len(outbound))


async def changed_items(runtime: Runtime, namespace: str, repo: str,
                        beads: BeadsFile) -> list[WorkItem]:
    """The items whose content differs from what memstream last read of them."""
    known = {row.item_id: row.content_hash
             for row in await runtime.stores.planning.items(namespace, repo)}
    return [item for item in beads.items
            if known.get(item.id) != content_hash(dict(item.fields))]


async def planning_items(runtime: Runtime, namespace: str, repo: str
                ) -> tuple[BeadsFile, str | None]:
    """The repo's items fresh from its file, or, when the file fails, as memstream last read
    them, with why. Raises UnknownRepo for a repo it has no planning for."""
    try:
        return await read_planning(runtime, namespace, repo), None
    except UnknownRepo:
        raise
    except PlanningUnavailable as exc:
        rows = await runtime.stores.planning.items(namespace, repo)
        return BeadsFile(tuple(WorkItem(row.fields) for row in rows), "bd", True), exc.detail


async def planning_candidates(runtime: Runtime, namespace: str, repo: str,
                              ref: str) -> list[Candidate]:
    """The pack's planning section for `ref`: the item, its blockers, its ready siblings,
    each with its cost in the model's tokens. Raises PlanningUnavailable (the file, bd) and
    UnknownItem."""
    beads = await read_planning(runtime, namespace, repo)
    context = planning_context(beads, ref)
    entries = pack_entries(context)
    texts = [entry.text for entry in entries]
    costs = await asyncio.to_thread(runtime.embedder.token_costs, texts)
    # Not embedded: an item's description runs to hundreds of tokens, and embedding the
    # section's items took 80-90 ms of every pack. A zero vector is no one's near-duplicate,
    # so the work item and its neighbours are never dropped as repeats of a memory.
    unembedded = np.zeros(runtime.embedder.dimension, dtype=np.float32)
    now = datetime.now(UTC)
    by_id = beads.by_id()
    return [Candidate(
        section="planning", record_id=f"beads:{repo}#{entry.item.id}",
        kind=f"planning_{entry.role}", text=entry.text,
        source=f"beads:{repo}#{entry.item.id}", trust_class="raw",
        provenance={"repo": repo, "item_id": entry.item.id, "role": entry.role,
                    "status": entry.item.status,
                    "ready": is_ready(entry.item, by_id),
                    "open_blockers": [b.item_id for b in blockers(entry.item, by_id) if b.open]},
        created_at=created, age_days=age_in_days(created, now), score=1.0, token_cost=cost,
        vector=unembedded)
        for entry, cost in zip(entries, costs, strict=True)
        for created in (_created(entry.item, now),)]


def _created(item: WorkItem, now: datetime) -> datetime:
    """When the item was created, as Beads wrote it (in UTC when it names no zone); one
    without a time Python can read is shown as read now."""
    try:
        created = datetime.fromisoformat(str(item.fields.get("created_at")))
    except ValueError:
        return now
    return created if created.tzinfo is not None else created.replace(tzinfo=UTC)
