"""Sessions (seed 003): an agent wakes on a task, checkpoints memories mid-session, and
sleeps with a summary and next steps that become its handoff for the next session.

The rules a session's events follow (`admitted`), and the memory writes each asks for
(`memory_writes`), named by the session event so that a replay writes the same memories.
The handoff text is built from what the agent passed, deterministically.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from memstream_client.events import (
    MemoryWrite,
    MemoryWritePayload,
    SessionCheckpointed,
    SessionEvent,
    SessionSlept,
    SessionWoke,
)
from memstream_client.ids import memory_record_id, session_memory_event_id
from processors.events.errors import Rejected

HANDOFF_PART = "handoff"
HANDOFF_TAG = "handoff"
TITLE_MAX = 200
# A memory's text, as memory.write takes it.
TEXT_MAX = 8000


@dataclass(frozen=True)
class SessionState:
    """What a session's ledger says of it so far."""

    agent_id: str
    task: str
    # The event id of its session.slept; None while it is awake.
    slept_by: str | None
    event_ids: frozenset[str]


def admitted(state: SessionState | None, event: SessionEvent) -> SessionState:
    """The session's state once `event` is applied; `Rejected` if the event breaks the
    session's rules. An event already in the ledger is a replay: it changes nothing."""
    session = event.payload.session_id
    if state is not None and event.event_id in state.event_ids:
        return state
    if isinstance(event, SessionWoke):
        if state is not None:
            raise Rejected("invalid_transition", f"session {session!r} woke already "
                                                 f"(agent {state.agent_id!r})")
        return SessionState(event.payload.agent_id, event.payload.task, None,
                            frozenset({event.event_id}))
    if state is None:
        raise Rejected("broken_reference",
                       f"{event.type} for session {session!r}, which never woke")
    if event.payload.agent_id != state.agent_id:
        raise Rejected("invalid_transition",
                       f"session {session!r} is agent {state.agent_id!r}'s, not "
                       f"{event.payload.agent_id!r}'s")
    if state.slept_by is not None:
        raise Rejected("invalid_transition", f"session {session!r} has ended (slept)")
    return replace(state, event_ids=state.event_ids | {event.event_id},
                   slept_by=event.event_id if isinstance(event, SessionSlept) else None)


def handoff_text(summary: str, next_steps: Sequence[str]) -> str:
    """The handoff as the next session reads it: the summary, then the next steps."""
    text = f"Summary: {summary.strip()}"
    if next_steps:
        text += "\n\nNext steps:\n" + "\n".join(f"- {step.strip()}" for step in next_steps)
    return text


def handoff_title(task: str) -> str:
    title = f"Handoff: {' '.join(task.split())}" if task.strip() else "Handoff"
    return title if len(title) <= TITLE_MAX else title[:TITLE_MAX - 1] + "…"


def handoff_event_id(namespace: str, slept_event_id: str) -> str:
    """The event id of the handoff memory's write a session.slept asks for."""
    return session_memory_event_id(namespace, slept_event_id, HANDOFF_PART)


def handoff_record_id(namespace: str, slept_event_id: str) -> str:
    """The record id of the handoff memory a session.slept writes, when it is stored as a
    new record (the write's outcome says whether it was: stores/write_outcomes.py)."""
    return memory_record_id(namespace, handoff_event_id(namespace, slept_event_id))


def checkpoint_record_ids(namespace: str, event: SessionCheckpointed) -> list[str]:
    """The record ids of the memories a checkpoint writes, in its order."""
    return [memory_record_id(namespace, session_memory_event_id(namespace, event.event_id,
                                                                str(n)))
            for n in range(len(event.payload.memories))]


def memory_writes(event: SessionEvent, task: str,
                  rewritten: str | None = None) -> list[MemoryWrite]:
    """The memory writes a session event asks for, in the session's thread: a checkpoint's
    memories, or a sleep's handoff (`task`: what the session woke for; `rewritten`: the LLM
    hook's text of the handoff, which replaces the deterministic one). A handoff whose
    deterministic text does not fit a memory is refused, rewritten or not."""
    namespace, session = event.namespace, event.payload.session_id
    agent = event.payload.agent_id
    if isinstance(event, SessionCheckpointed):
        payloads = [(str(n), MemoryWritePayload(
            text=memory.text, title=memory.title, memory_type=memory.memory_type,
            tags=memory.tags, scope=memory.scope,
            agent_id=agent if memory.scope == "personal" else None,
            thread=session, source_ref=f"session:{session}"))
            for n, memory in enumerate(event.payload.memories)]
    elif isinstance(event, SessionSlept):
        text = handoff_text(event.payload.summary, event.payload.next_steps)
        if len(text) > TEXT_MAX:
            raise Rejected("invalid_event", f"the handoff (summary and next steps) is "
                                            f"{len(text)} characters; a memory holds "
                                            f"{TEXT_MAX}")
        payloads = [(HANDOFF_PART, MemoryWritePayload(
            text=rewritten or text,
            title=handoff_title(task), memory_type="handoff", tags=[HANDOFF_TAG],
            scope="personal", agent_id=agent, thread=session,
            source_ref=f"session:{session}"))]
    else:
        payloads = []
    return [MemoryWrite(event_id=session_memory_event_id(namespace, event.event_id, part),
                        type="memory.write", namespace=namespace,
                        occurred_at=event.occurred_at, producer=event.producer,
                        payload=payload)
            for part, payload in payloads]
