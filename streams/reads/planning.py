"""Reading a repository's planning for a reader (a context pack, the planning routes): the
file as it is now, with the write-backs memstream has not written into it yet laid over it;
the items of the file that changed since memstream last read them are published to
`planning.events` as item upserts (named by their content, so re-reading an unchanged item
adds nothing).

Beads failing never fails a run or a pack: a read that cannot be done raises
PlanningUnavailable, which callers name in `degraded`, and is counted.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime

from processors.planning.beads import BeadsFile, WorkItem
from processors.planning.write_backs import change_of, content_hash, settle, upserted
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
