"""The planning plane's events (docs/planning.md): what a run's events ask of its planning
item (a claim on run.started; a close or a release, and the follow-ups of its next steps, on
run.finished), an item read from the file as an upsert, and the write-backs queued in
Postgres turned back into Beads changes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memstream_client.events import (
    PlanningClaimed,
    PlanningClaimedPayload,
    PlanningClosed,
    PlanningClosedPayload,
    PlanningFollowupDiscovered,
    PlanningFollowupDiscoveredPayload,
    PlanningItemUpserted,
    PlanningItemUpsertedPayload,
    PlanningWriteBack,
    RunFinished,
    RunStarted,
)
from memstream_client.ids import planning_event_id
from processors.planning.beads import (
    BeadsFile,
    Change,
    Claim,
    Close,
    FollowUp,
    PlanningContext,
    Release,
    UnknownItem,
    WorkItem,
    apply,
)

PRODUCER = "memstream-planning"
# Who a claim and a follow-up name when the run gives no agent.
DEFAULT_ACTOR = "memstream"
MAX_TITLE = 200
MAX_REASON = 2000


def content_hash(fields: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(fields, sort_keys=True, ensure_ascii=False)
                          .encode()).hexdigest()


def upserted(namespace: str, repo: str, item: WorkItem, at: datetime) -> PlanningItemUpserted:
    """The item as read: named by its content, so reading it again unchanged is the same
    event."""
    fields = dict(item.fields)
    return PlanningItemUpserted(
        event_id=planning_event_id(namespace, "upserted", repo, item.id, content_hash(fields)),
        namespace=namespace, occurred_at=at, producer=PRODUCER, type="planning.item_upserted",
        payload=PlanningItemUpsertedPayload(repo=repo, item_id=item.id, item=fields))


def claim_of(started: RunStarted) -> PlanningClaimed | None:
    """A run started on a planning item claims it for its agent."""
    payload = started.payload
    if payload.planning_ref is None or not payload.repo:
        return None
    return PlanningClaimed(
        event_id=planning_event_id(started.namespace, "claimed", started.event_id),
        namespace=started.namespace, occurred_at=started.occurred_at, producer=PRODUCER,
        type="planning.claimed",
        payload=PlanningClaimedPayload(repo=payload.repo, item_id=payload.planning_ref,
                                       run_id=payload.run_id,
                                       assignee=payload.agent or DEFAULT_ACTOR))


def finish_of(started: RunStarted, finished: RunFinished) -> list[PlanningWriteBack]:
    """A finished run closes its item (it succeeded) or releases it (it did not), and files
    each of its next steps as a follow-up discovered from the item."""
    ref, repo, run = started.payload.planning_ref, started.payload.repo, finished.payload
    if ref is None or not repo:
        return []
    namespace = finished.namespace
    succeeded = run.status == "succeeded"
    said = (run.summary if succeeded else run.error or run.summary).strip()
    reason = _clipped(said or f"run {run.run_id} {run.status}", MAX_REASON) if succeeded \
        else _clipped(f"run {run.run_id} {run.status}: {said or 'no summary'}", MAX_REASON)
    events: list[PlanningWriteBack] = [PlanningClosed(
        event_id=planning_event_id(namespace, "closed", finished.event_id),
        namespace=namespace, occurred_at=finished.occurred_at, producer=PRODUCER,
        type="planning.closed",
        payload=PlanningClosedPayload(repo=repo, item_id=ref, run_id=run.run_id,
                                      outcome="closed" if succeeded else "released",
                                      reason=reason))]
    actor = started.payload.agent or DEFAULT_ACTOR
    for number, step in enumerate(step for step in run.next_steps if step.strip()):
        title, _, rest = step.strip().partition("\n")
        events.append(PlanningFollowupDiscovered(
            event_id=planning_event_id(namespace, "followup", finished.event_id, str(number)),
            namespace=namespace, occurred_at=finished.occurred_at, producer=PRODUCER,
            type="planning.followup_discovered",
            payload=PlanningFollowupDiscoveredPayload(
                repo=repo, from_item_id=ref, run_id=run.run_id,
                title=_clipped(title, MAX_TITLE),
                description="\n\n".join(part for part in (
                    rest.strip(), f"Found by run {run.run_id}.") if part),
                created_by=actor)))
    return events


def _clipped(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def change_of(type_: str, payload: Mapping[str, Any], at: datetime) -> Change:
    """A queued write-back (its event's type and payload) as the Beads change it makes."""
    if type_ == "planning.claimed":
        return Claim(payload["item_id"], payload["assignee"], at)
    if type_ == "planning.closed":
        if payload["outcome"] == "closed":
            return Close(payload["item_id"], payload["reason"], at)
        return Release(payload["item_id"], payload["reason"], at)
    if type_ == "planning.followup_discovered":
        return FollowUp(payload["from_item_id"], payload["title"], payload["description"],
                        payload["created_by"], at)
    raise ValueError(f"{type_!r} is no write-back")


@dataclass(frozen=True)
class Settled:
    beads: BeadsFile
    applied: list[str]
    # Write-backs the file cannot take (their item is gone from it), with why.
    failed: list[tuple[str, str]]


def settle(beads: BeadsFile, pending: Sequence[tuple[str, Change]]) -> Settled:
    """The file with the pending write-backs (event id, change) applied in order; one whose
    item the file does not hold fails alone, and the others are applied."""
    applied: list[str] = []
    failed: list[tuple[str, str]] = []
    for event_id, change in pending:
        try:
            beads = apply(beads, [change])
        except UnknownItem as exc:
            failed.append((event_id, f"the file holds no item {exc.args[0]!r}"))
            continue
        applied.append(event_id)
    return Settled(beads, applied, failed)


# What a pack shows of an item's description: its beginning, the budget keeps what fits.
MAX_PACK_DESCRIPTION = 1500


@dataclass(frozen=True)
class PackEntry:
    """One item of the pack's planning section: why it is there (`role`) and its text."""

    role: str
    item: WorkItem
    text: str


def pack_entries(context: PlanningContext) -> list[PackEntry]:
    """The planning section, in order: the item (title, status, priority, description,
    acceptance criteria), its blockers with their state, its ready siblings."""
    item = context.item
    description = item.description if len(item.description) <= MAX_PACK_DESCRIPTION \
        else item.description[:MAX_PACK_DESCRIPTION - 1] + "…"
    parts = [f"Work item {item.id}: {item.title}",
             f"status {item.status}, priority P{item.priority}, {item.issue_type}"
             + (", ready" if context.ready else "")]
    if description:
        parts.append(description)
    if item.acceptance_criteria and item.acceptance_criteria not in description:
        parts.append(f"Acceptance criteria:\n{item.acceptance_criteria}")
    entries = [PackEntry("item", item, "\n".join(parts))]
    entries += [PackEntry("blocker", blocker.item,
                          f"Blocked by {blocker.item_id} ({blocker.kind}, "
                          f"{blocker.item.status}): {blocker.item.title}")
                for blocker in context.blockers if blocker.item is not None]
    entries += [PackEntry("ready_sibling", sibling,
                          f"Ready sibling {sibling.id} (P{sibling.priority}): {sibling.title}")
                for sibling in context.ready_siblings]
    return entries
