"""Sessions: a wake with its handoff and pack, steps accepted, a session's ledger."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from memstream_client.answers.base import Answer, Instant
from memstream_client.answers.recall import ContextPack
from memstream_client.answers.writes import Waited, WriteOutcome


class Handoff(Answer):
    """The handoff an agent's last session left (docs/sessions.md)."""

    record_id: str
    session_id: str
    title: str | None
    text: str
    next_steps: list[str]
    slept_at: Instant


class Woke(Answer):
    """A session started: what the agent needs first. `handoff` is None before the agent's
    first sleep (or while its handoff is on its way); `context` is the pack for the task,
    the agent's core blocks first (without a task: the core blocks alone), None when memory
    is disabled."""

    namespace: str
    session_id: str
    agent_id: str
    task: str
    event_id: str
    handoff: Handoff | None
    context: ContextPack | None


class SessionStepAccepted(Waited):
    """A checkpoint or a sleep, published: the outcome of each memory it writes (a
    checkpoint's memories, a sleep's handoff), and the records that hold them once decided
    within the wait (`record_ids`, `handoff_record_id`): a memory refused, or not decided
    yet, is in `writes` only."""

    session_id: str
    event_id: str
    writes: list[WriteOutcome] = Field(default_factory=list)
    record_ids: list[str] = Field(default_factory=list)
    handoff_record_id: str | None = None

    @property
    def decided(self) -> bool:
        return all(write.decided for write in self.writes)


class SessionEventEntry(Answer):
    event_id: str
    type: str
    occurred_at: Instant
    producer: str
    payload: dict[str, Any]


class Session(Answer):
    """A session's ledger: its events in the order applied."""

    namespace: str
    session_id: str
    agent_id: str
    task: str
    # `awake`, or `asleep` once it slept.
    state: str
    woke_at: Instant
    slept_at: Instant | None
    handoff_record_id: str | None
    events: list[SessionEventEntry]
