"""What waits for review: pending diffs, and the review queue with the bodies that decide
each item."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from schemas.answers.base import Answer, Instant
from schemas.answers.records import MergeMember


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
    record_id: str | None = None
    diff_id: str | None = None
    block: AgentBlock | None = None


class ReviewBodies(Answer):
    route: str
    approve: ReviewBody
    reject: ReviewBody


class ReviewItem(Answer):
    """A pending diff (with the fields of `PendingDiff`), a draft merge (with its version,
    memory type, scope, agent and `members`) or a proposed lesson (with its version, memory
    type, scope, agent, `source_ref` and `related_ids`)."""

    # `pending_diff`, `draft_merge` or `proposed_lesson`.
    kind: str
    # What a review decides: the diff's id, or the merge's record id.
    id: str
    record_id: str | None
    title: str | None
    text: str | None
    proposer: str
    proposed_at: Instant
    review: ReviewBodies
    diff_id: str | None = None
    target: str | None = None
    block: AgentBlock | None = None
    base_version: int | None = None
    proposed: dict[str, Any] | None = None
    state: str | None = None
    version: int | None = None
    memory_type: str | None = None
    scope: str | None = None
    agent_id: str | None = None
    members: list[MergeMember] = Field(default_factory=list)
    source_ref: str | None = None
    related_ids: list[str] = Field(default_factory=list)


class ReviewQueue(Answer):
    namespace: str
    items: list[ReviewItem]
