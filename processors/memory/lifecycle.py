"""The lifecycle of a stored memory: what an update, a deprecation, a review or a restore
does to it, as pure rules. The stream stage reads what they need, asks them for an
`Outcome`, and stores it as the record's next version.

Every rule refuses what it cannot apply with its reason (processors/events/errors.py):
`broken_reference` for a record, version or diff that does not exist, `stale_version` for
a change made against another version than the current one, `invalid_transition` for one
that the record's state does not admit (updating a deprecated or superseded memory,
approving what is not a draft).
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal

from memstream_client.events import (
    MAX_TAGS,
    ChangeKind,
    LifecycleEvent,
    MemoryDeprecate,
    MemoryRestore,
    MemoryReview,
    MemoryUpdate,
    Tier,
)
from memstream_client.links import wiki_links
from memstream_client.redaction import redact_secrets
from processors.events.errors import Rejected
from processors.memory.tiers import TierRules, tier_after_updates
from schemas.records import Record

# The fields of a version beside its text and body: what history shows and restore brings
# back (the tier moves by its own rule, and is shown, not restored).
VERSIONED_FIELDS = ("title", "memory_type", "tags", "related_ids", "review_state", "tier",
                    "valid_until", "invalidated_by")
RESTORED_FIELDS = ("title", "memory_type", "tags", "related_ids", "review_state")
# The fields an update may set: its content, whose changes count toward promotion.
CONTENT_FIELDS = frozenset({"text", "title", "memory_type", "tags", "related_ids"})
DEFAULT_TIER_RULES = TierRules()
# Which records take updates only through review (MEMSTREAM_PROTECT).
Protection = Literal["approved", "core_blocks"]
OutcomeKind = ChangeKind | Literal["unchanged"]


@dataclass(frozen=True)
class Current:
    """A record as it is stored now."""

    record: Record
    version: int
    superseded_by: str | None = None


@dataclass(frozen=True)
class RecordVersion:
    """One version of a record, as history keeps it."""

    record_id: str
    version: int
    text: str
    body: Mapping[str, Any]
    fields: Mapping[str, Any]
    change: str
    actor: str | None
    event_id: str
    changed_at: datetime
    changed: tuple[str, ...] = ()
    reason: str | None = None


@dataclass(frozen=True)
class PendingDiff:
    """A change proposed to a protected record, waiting for review."""

    diff_id: str
    namespace: str
    record_id: str
    base_version: int
    proposed: Mapping[str, Any]
    proposer: str
    proposed_at: datetime
    state: Literal["pending", "approved", "rejected", "superseded"] = "pending"
    decided_by: str | None = None


@dataclass(frozen=True)
class Outcome:
    """What a lifecycle event does. `record` is the record after it; a change of text or
    title needs a new vector."""

    change: OutcomeKind
    record: Record
    actor: str
    changed: tuple[str, ...] = ()
    reason: str | None = None
    # A proposal to store, or the diff a review decided and how.
    proposal: PendingDiff | None = None
    decided: tuple[str, Literal["approved", "rejected"]] | None = None
    # Records this one replaces from now on: the members of a merge once it is approved.
    supersedes: tuple[str, ...] = ()
    # The tier the change earned the record (processors/memory/tiers.py): a version of its own.
    promoted_to: Tier | None = None

    @property
    def new_version(self) -> bool:
        """Whether the record itself changes (a proposal or a rejected diff leaves it)."""
        return self.change not in ("unchanged", "proposed") and self.changed != ()

    @property
    def reembed(self) -> bool:
        return "text" in self.changed or "title" in self.changed


@dataclass(frozen=True)
class Facts:
    """What the rules need beside the record: read by the stream stage before it asks."""

    current: Current
    # Related ids the namespace holds, among those an update names.
    known_ids: Collection[str] = ()
    # The version a restore names, and the diff a review names.
    version: RecordVersion | None = None
    diff: PendingDiff | None = None
    # Updates of its content the record has had.
    updates: int = 0


def version_fields(record: Record) -> dict[str, Any]:
    """The fields a version keeps beside text and body."""
    return {
        "title": record.title, "memory_type": record.memory_type, "tags": list(record.tags),
        "related_ids": list(record.related_ids), "review_state": record.review_state,
        "tier": record.tier,
        "valid_until": record.valid_until.isoformat() if record.valid_until else None,
        "invalidated_by": record.invalidated_by,
    }


def record_id_of(event: LifecycleEvent) -> str:
    """The record a lifecycle event changes (a review of a block's diff changes none)."""
    record_id = event.payload.record_id
    if record_id is None:
        raise Rejected("invalid_event", f"{event.type} {event.event_id} names no record")
    return record_id


def outcome_of(event: LifecycleEvent, facts: Facts, protect: Collection[Protection] = (),
               sanitized: Mapping[str, int] | None = None,
               tiers: TierRules = DEFAULT_TIER_RULES) -> Outcome:
    """What `event` does to the record in `facts`; raises `Rejected` when it cannot."""
    current = facts.current
    _check_changeable(current, event)
    if isinstance(event, MemoryUpdate):
        return _promoted(_update(event, facts, protect, sanitized or {}), facts, tiers)
    if isinstance(event, MemoryDeprecate):
        return _deprecate(event, current)
    if isinstance(event, MemoryReview):
        return _promoted(_review(event, facts), facts, tiers)
    return _restore(event, facts)


def _promoted(outcome: Outcome, facts: Facts, tiers: TierRules) -> Outcome:
    """An update of the content (applied at once, or as an approved diff) counts toward the
    record's next tier."""
    if not outcome.new_version or not set(outcome.changed) & CONTENT_FIELDS:
        return outcome
    tier = tier_after_updates(outcome.record.tier, facts.updates + 1, tiers)
    return outcome if tier == outcome.record.tier else replace(outcome, promoted_to=tier)


def _check_changeable(current: Current, event: LifecycleEvent) -> None:
    record = current.record
    if record.record_kind != "memory":
        raise Rejected("invalid_transition",
                       f"{record.record_id} is a {record.record_kind}: only memories change "
                       "by lifecycle events")
    if record.expires_at is not None and record.expires_at <= event.occurred_at:
        raise Rejected("invalid_transition",
                       f"{record.record_id} expired at {record.expires_at.isoformat()}")
    if current.superseded_by is not None:
        raise Rejected("invalid_transition",
                       f"{record.record_id} was merged into {current.superseded_by}; change "
                       "that record instead")
    if record.invalidated_by is not None and not isinstance(event, MemoryRestore):
        raise Rejected("invalid_transition",
                       f"{record.record_id} was {superseded_note(record)}: change that "
                       "memory instead, or restore a version of this one first")
    expected = getattr(event.payload, "expected_version", None)
    if expected is not None and expected != current.version:
        raise Rejected("stale_version",
                       f"{record.record_id} is at version {current.version}, the "
                       f"{event.type} expected version {expected}")


def _update(event: MemoryUpdate, facts: Facts, protect: Collection[Protection],
            sanitized: Mapping[str, int]) -> Outcome:
    current = facts.current
    record = current.record
    if record.review_state == "deprecated":
        raise Rejected("invalid_transition",
                       f"{record.record_id} is deprecated: restore a version of it first")
    payload = event.payload
    proposed = payload.model_dump(include=payload.model_fields_set & CONTENT_FIELDS,
                                  exclude_none=True)
    missing = [related for related in proposed.get("related_ids", ())
               if related not in facts.known_ids]
    if missing:
        raise Rejected("broken_reference", f"related_ids not found in namespace "
                       f"{record.namespace!r}: {', '.join(missing)}")
    if is_protected(record, protect):
        return Outcome("proposed", record, event.producer, proposal=PendingDiff(
            diff_id=event.event_id, namespace=record.namespace, record_id=record.record_id,
            base_version=current.version, proposed=proposed, proposer=event.producer,
            proposed_at=event.occurred_at))
    return _changed(record, "updated", event.producer, proposed, sanitized=sanitized)


def is_protected(record: Record, protect: Collection[Protection]) -> bool:
    """Whether an update of `record` waits for review. An agent's personal memory in the
    active tier is its working memory (seed 001's active memories, rewritten as work goes
    on), so it changes at once; once promoted it is protected like any approved memory."""
    if "approved" not in protect or record.review_state != "approved":
        return False
    return not (record.scope == "personal" and record.tier == "active")


def _deprecate(event: MemoryDeprecate, current: Current) -> Outcome:
    record = current.record
    if record.review_state == "deprecated":
        return Outcome("unchanged", record, event.producer)
    return _changed(record, "deprecated", event.producer, {"review_state": "deprecated"},
                    reason=event.payload.reason)


def _review(event: MemoryReview, facts: Facts) -> Outcome:
    payload = event.payload
    record = facts.current.record
    reason = payload.note
    if payload.diff_id is None:
        if record.review_state != "draft":
            raise Rejected("invalid_transition",
                           f"{record.record_id} is {record.review_state}, not a draft: "
                           "nothing to review")
        if payload.decision == "approve":
            approved = _changed(record, "approved", payload.reviewer,
                                {"review_state": "approved", "trust_class": "approved"},
                                reason=reason)
            # An approved merge replaces its members, which stayed live while it was a draft.
            members = tuple(record.body.get("merged_from", ()))
            return replace(approved, supersedes=members)
        return _changed(record, "rejected", payload.reviewer, {"review_state": "deprecated"},
                        reason=reason or "rejected in review")
    diff = facts.diff
    if diff is None or diff.record_id != record.record_id:
        raise Rejected("broken_reference",
                       f"no pending diff {payload.diff_id} for {record.record_id}")
    if diff.state != "pending":
        raise Rejected("invalid_transition", f"diff {diff.diff_id} is {diff.state}")
    if payload.decision == "reject":
        return Outcome("rejected", record, payload.reviewer, reason=reason,
                       decided=(diff.diff_id, "rejected"))
    if diff.base_version != facts.current.version:
        raise Rejected("stale_version",
                       f"diff {diff.diff_id} was proposed against version {diff.base_version}"
                       f" of {record.record_id}, which is at version {facts.current.version}")
    # An approved invalidation takes the record out of recall: a change of its own kind.
    change: ChangeKind = "invalidated" if "invalidated_by" in diff.proposed else "approved"
    approved = _changed(record, change, payload.reviewer, diff.proposed, reason=reason)
    return Outcome(approved.change, approved.record, approved.actor, approved.changed,
                   reason, decided=(diff.diff_id, "approved"))


def _restore(event: MemoryRestore, facts: Facts) -> Outcome:
    record = facts.current.record
    old = facts.version
    if old is None:
        raise Rejected("broken_reference",
                       f"{record.record_id} has no version {event.payload.version}")
    fields = {name: old.fields[name] for name in RESTORED_FIELDS if name in old.fields}
    # A restored memory is in force again, whatever invalidated it since.
    restored = _changed(record, "restored", event.producer,
                        {**fields, "text": old.text, **_REINSTATED},
                        reason=f"restored version {old.version}")
    if restored.change == "unchanged":
        return restored
    # The body comes back too (its links and redactions are the old text's), but not the
    # thread context, which belongs to where the memory sits, not to a version.
    body = {**old.body, **({"context": record.body["context"]} if "context" in record.body
                           else {})}
    return Outcome(restored.change, restored.record.model_copy(update={"body": body}),
                   restored.actor, restored.changed, restored.reason)


def _changed(record: Record, change: ChangeKind, actor: str, fields: Mapping[str, Any], *,
             reason: str | None = None, sanitized: Mapping[str, int] | None = None) -> Outcome:
    """`record` with `fields` set (text and title redacted of secrets, the wiki links
    followed again); "unchanged" when they are what the record holds already."""
    update: dict[str, Any] = {}
    body = dict(record.body)
    for name, value in fields.items():
        if name == "text":
            redacted = redact_secrets(str(value))
            value = redacted.text
            body["wiki_links"] = wiki_links(value)
            body["redactions"] = dict(sorted(redacted.found.items()))
        elif name == "title" and value is not None:
            value = redact_secrets(str(value)).text
        elif name in ("tags", "related_ids"):
            value = tuple(dict.fromkeys(value))
        elif name == "valid_until" and isinstance(value, str):
            # As a pending diff keeps it: JSON.
            value = datetime.fromisoformat(value)
        if getattr(record, name) != value:
            update[name] = value
    if not update:
        return Outcome("unchanged", record, actor)
    if sanitized:
        body["sanitized"] = dict(sorted(sanitized.items()))
    update["body"] = body
    return Outcome(change, record.model_copy(update=update), actor,
                   tuple(name for name in _FIELD_ORDER if name in update), reason)


# The order in which `changed` names fields, whatever order they were given in.
_FIELD_ORDER = ("text", "title", "memory_type", "tags", "related_ids", "review_state",
                "trust_class", "valid_until", "invalidated_by")
_REINSTATED = {"valid_until": None, "invalidated_by": None}


# Restatements a memory keeps in its body, the latest.
MAX_RESTATEMENTS = 20


def restated(current: Current, write: Record, cosine: float) -> Outcome:
    """A write that restates `current` (processors/memory/twins.py): a version of it that keeps
    its own text and adds the write's provenance, text and tags."""
    record = current.record
    source = write.provenance
    entry = {
        "event_id": source.source_event_id, "record_id": write.record_id, "text": write.text,
        "producer": source.producer, "occurred_at": write.created_at.isoformat(),
        "source": f"{source.source_topic}/{source.source_partition}/{source.source_offset}",
        "cosine": round(cosine, 4),
    }
    earlier = list(record.body.get("restatements", ()))
    body = {**record.body, "restatements": [*earlier, entry][-MAX_RESTATEMENTS:],
            "restated": int(record.body.get("restated", 0)) + 1}
    tags = tuple(dict.fromkeys((*record.tags, *write.tags)))[:MAX_TAGS]
    changed = ("restatements", *(("tags",) if tags != record.tags else ()))
    return Outcome("updated", record.model_copy(update={"body": body, "tags": tags}),
                   source.producer, changed,
                   f"restated by {source.source_event_id} (cosine {cosine:.2f})")


def version_diff(older: RecordVersion, newer: RecordVersion) -> dict[str, Any]:
    """What changed from one version to another: each field that differs, before and after,
    and the text as a unified diff."""
    fields = {
        name: {"from": older.fields.get(name), "to": newer.fields.get(name)}
        for name in VERSIONED_FIELDS if older.fields.get(name) != newer.fields.get(name)
    }
    text = list(difflib.unified_diff(
        older.text.splitlines(), newer.text.splitlines(),
        fromfile=f"v{older.version}", tofile=f"v{newer.version}", lineterm=""))
    return {"record_id": older.record_id, "from": older.version, "to": newer.version,
            "fields": fields, "text": text}


def invalidated(current: Current, newer: Record, because: str, event_id: str,
                protect: Collection[Protection] = ()) -> Outcome:
    """A live memory that `newer` restates with another value (processors/knowledge/stale_facts.py):
    its fact held until `newer` occurred, and `newer` says what holds since. The record keeps
    its text and leaves recall as a version of its own (`invalidated`); a protected record
    (under the review policy) waits for a reviewer, as a pending diff under `event_id`."""
    record = current.record
    actor = newer.provenance.producer
    reason = f"restated by {newer.record_id} with another value: {because}"
    if is_protected(record, protect):
        proposed = {"valid_until": newer.created_at.isoformat(),
                    "invalidated_by": newer.record_id}
        return Outcome("proposed", record, actor, reason=reason, proposal=PendingDiff(
            diff_id=event_id, namespace=record.namespace, record_id=record.record_id,
            base_version=current.version, proposed=proposed, proposer=actor,
            proposed_at=newer.created_at))
    return _changed(record, "invalidated", actor,
                    {"valid_until": newer.created_at, "invalidated_by": newer.record_id},
                    reason=reason)


def superseded_note(record: Record) -> str:
    """What a reader is told of an invalidated memory: by which memory, from when."""
    when = record.valid_until.date().isoformat() if record.valid_until else "an unknown date"
    return f"superseded by {record.invalidated_by} on {when}"
