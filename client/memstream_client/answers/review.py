"""What waits for review: pending diffs, and the review queue with the bodies that decide
each item."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from memstream_client.answers.base import Answer, Instant
from memstream_client.answers.records import MergeMember


class AgentBlock(Answer):
    agent_id: str
    label: str


class PendingDiff(Answer):
    diff_id: str
    # `record` or `block`.
    target: str
    base_version: int
    proposed: dict[str, Any]
    proposer: str
    proposed_at: Instant
    state: str
    record_id: str | None = None
    block: AgentBlock | None = None


class PendingDiffs(Answer):
    namespace: str
    pending_diffs: list[PendingDiff]


class ReviewBody(Answer):
    """A `POST /v1/reviews` body as a queue item gives it, ready to send."""

    namespace: str
    decision: str
    # A record's diff names its record and diff; a block's, its block and diff; a draft, its
    # record alone.
    record_id: str | None = None
    block: AgentBlock | None = None
    diff_id: str | None = None


class ReviewBodies(Answer):
    route: str
    approve: ReviewBody
    reject: ReviewBody


class ReviewItem(Answer):
    """A pending diff (with the fields of `PendingDiff`), a draft merge (with its version,
    memory type, scope, agent and `members`) or a proposed lesson (with its version, memory
    type, scope, agent, `source_ref` and `related_ids`). A field a kind does not have is
    absent from its items."""

    # `pending_diff`, `draft_merge` or `proposed_lesson`.
    kind: str
    # What a review decides: the diff's id, or the merge's record id.
    id: str
    # None for a block's diff.
    record_id: str | None
    # The record's as it is now; None for a block's diff, or a record the key may not read.
    title: str | None
    text: str | None
    # In the order each kind's items are written, whatever the kind.
    diff_id: str | None = None
    target: str | None = None
    base_version: int | None = None
    proposed: dict[str, Any] | None = None
    version: int | None = None
    memory_type: str | None = None
    scope: str | None = None
    agent_id: str | None = None
    proposer: str
    proposed_at: Instant
    state: str | None = None
    block: AgentBlock | None = None
    members: list[MergeMember] = Field(default_factory=list)
    source_ref: str | None = None
    related_ids: list[str] = Field(default_factory=list)
    review: ReviewBodies


class ReviewQueue(Answer):
    namespace: str
    items: list[ReviewItem]
