"""Records, their versions, lineage and diffs; core blocks; a namespace's stats and change feed."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from memstream_client.answers.base import Answer, Instant


class RecordProvenance(Answer):
    source_event_id: str
    source_topic: str
    source_partition: int
    source_offset: int
    producer: str


class RecordView(Answer):
    """A record whole, every field as stored."""

    record_id: str
    namespace: str
    record_kind: str
    scope: str
    agent_id: str | None
    title: str | None
    text: str
    body: dict[str, Any]
    memory_type: str | None
    tags: list[str]
    related_ids: list[str]
    tier: str
    review_state: str
    trust_class: str
    source_ref: str | None
    run_ref: str | None
    thread: str | None
    # The repository it belongs to (None: the whole namespace's), and who may be shown it.
    repo: str | None
    security_scope: str | None
    provenance: RecordProvenance
    created_at: Instant
    expires_at: Instant | None
    # When its fact stopped holding, and the memory that restated it with another value.
    valid_until: Instant | None
    invalidated_by: str | None


class LineageVersion(Answer):
    version: int
    text: str
    body: dict[str, Any]
    event_id: str
    changed_at: Instant


class SupersededMember(Answer):
    record_id: str
    version: int
    title: str | None
    text: str


class MergeMember(Answer):
    record_id: str
    version: int
    title: str | None
    # The start of its text.
    excerpt: str
    review_state: str
    superseded_by: str | None


class Standing(Answer):
    """Whether a record is in force; if not, what replaced it: the merge it went into, or
    the memory that restated it with another value (and from when)."""

    in_force: bool
    note: str | None
    merged_into: str | None = None
    invalidated_by: str | None = None
    valid_until: Instant | None = None


class VersionedFields(Answer):
    """The fields a version keeps beside its text and body, as they were then."""

    title: str | None
    memory_type: str | None
    tags: list[str]
    related_ids: list[str]
    review_state: str
    tier: str
    # Kept by the versions made since knowledge over time (schema 24), absent before.
    valid_until: Instant | None = None
    invalidated_by: str | None = None


class VersionMade(Answer):
    """What made a version: its number, the change, who made it, by which event and when,
    the fields it changed, and why."""

    version: int
    change: str
    actor: str | None
    event_id: str
    changed_at: Instant
    changed: list[str]
    reason: str | None


class VersionThen(VersionMade):
    """The version of a record that was current at a moment, as history keeps it: what made
    it, its text and body, and its versioned fields apart."""

    record_id: str
    text: str
    body: dict[str, Any]
    fields: VersionedFields


class StandingAt(Answer):
    """A record at a moment (`as_of`): whether it was in force (`in_force`,
    `not_recorded`, `superseded`, `expired`, `invalidated`) and its version then."""

    moment: Instant
    standing: str
    version: VersionThen | None


class RecordLineage(Answer):
    record: RecordView
    version: int
    superseded_by: str | None
    versions: list[LineageVersion]
    supersedes: list[SupersededMember]
    # A merge's members, as they are now.
    members: list[MergeMember]
    # How sure memory is of it (docs/retrieval.md#confidence), and when memory learned it.
    confidence: float
    recorded_at: Instant | None
    standing: Standing
    # Asked with as_of.
    as_of: StandingAt | None = None


class StoredRecord(RecordView):
    """A record read by id among others: as stored now, its version and what superseded it
    (if anything)."""

    version: int
    superseded_by: str | None


class RecordBatch(Answer):
    namespace: str
    # In the order asked.
    records: list[StoredRecord]
    # The ids asked that name no record the key may read.
    not_found: list[str]


class RecordSummary(Answer):
    record_id: str
    kind: str
    title: str | None
    # The first sentence of its text, on one line, cut to 120 characters.
    description: str
    memory_type: str | None
    tier: str
    scope: str
    agent_id: str | None
    review_state: str
    created_at: Instant
    updated_at: Instant


class RecordList(Answer):
    namespace: str
    # Newest first.
    records: list[RecordSummary]
    # The cursor of the next page; None on the last.
    next: str | None


class RecordVersion(VersionedFields, VersionMade):
    """One version as history keeps it: its text and versioned fields as they were then,
    and what made it."""

    text: str


class RecordHistory(Answer):
    namespace: str
    record_id: str
    versions: list[RecordVersion]


class FieldChange(Answer):
    before: Any = Field(alias="from")
    after: Any = Field(alias="to")


class RecordDiff(Answer):
    namespace: str
    record_id: str
    from_version: int = Field(alias="from")
    to_version: int = Field(alias="to")
    fields: dict[str, FieldChange]
    # The text as a unified diff, line by line.
    text: list[str]


class BlockVersion(Answer):
    version: int
    actor: str | None
    event_id: str
    changed: list[str]
    changed_at: Instant
    usage_before_rotation: float
    archived_record_id: str | None


class CoreBlock(Answer):
    namespace: str
    agent_id: str
    label: str
    version: int
    text: str
    fields: dict[str, str | list[str]]
    chars: int
    max_chars: int
    usage: float
    strategy: str
    threshold: float
    versions: list[BlockVersion]


class Stats(Answer):
    namespace: str
    # Live records by kind, in Postgres.
    records: dict[str, int]
    index_points: int


class Change(VersionMade):
    """A change of the feed: the version made, and the record it was made to."""

    record_id: str
    record_kind: str
    memory_type: str | None
    scope: str
    agent_id: str | None
    title: str | None
    excerpt: str
    # Resumes the feed after this change.
    cursor: str


class Changes(Answer):
    namespace: str
    changes: list[Change]
    # Resumes after the last change (where the request started, when none came).
    next: str
