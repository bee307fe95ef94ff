"""What became of a write: its outcome, read by the write's event id, and the answers of the
routes that publish writes, which are that outcome once decided within the wait they were
given, or `pending` with where to read it (202)."""

from __future__ import annotations

from memstream_client.answers.base import Answer, Instant
from memstream_client.answers.review import AgentBlock


class Waited(Answer):
    """An answer a write route gives once it has waited for the worker: 200 when every write
    it published is decided, 202 (accepted, pending) otherwise."""

    @property
    def decided(self) -> bool:
        raise NotImplementedError


class WriteOutcome(Waited):
    """What a write became (`GET /v1/writes/{event_id}`): `stored` as a new record; `restated`
    a live memory it says again (`record_id` is that memory, `version` the one it made);
    `updated`, `deprecated`, `restored`, `approved`, `rejected`, `invalidated`, `promoted`
    or `unchanged` (a change of the record it names); `proposed` (a change of a protected
    record or block, waiting for review as `diff_id`); `refused` as not worth keeping, or
    `dead_lettered`, with `reason` (and a dead letter's `detail`); or `pending`: not decided
    yet, or no write of that id reached the worker."""

    namespace: str
    event_id: str
    outcome: str
    # Where this outcome is read (GET), while it is pending and after.
    outcome_url: str
    # The record it made or changed; none when refused, dead-lettered, pending, or a block's.
    record_id: str | None = None
    version: int | None = None
    diff_id: str | None = None
    reason: str | None = None
    detail: str | None = None
    # The core block it changed or proposed to change.
    block: AgentBlock | None = None
    decided_at: Instant | None = None

    @property
    def decided(self) -> bool:
        return self.outcome != "pending"


class MemoryWritten(WriteOutcome):
    """A memory write, published to `topic`: its outcome once decided, else pending."""

    topic: str


class ChangeAccepted(WriteOutcome):
    """An update, deprecation, restore or review of the record it names, published: its
    outcome once decided, else pending. An update of a protected record is `proposed`: its
    event id is the pending diff's id."""


class BlockEditAccepted(WriteOutcome):
    """A core block's edit, published: its outcome once decided (`updated`, or `proposed`
    for a protected block), else pending."""

    agent_id: str
    label: str
