"""`sessions.events` → the session ledger in Postgres → the memory writes each event asks
for (a checkpoint's memories, a sleep's handoff) published to `memory.events`, where the
memory intake stores them like any other write.

The writes are named by the session event (memstream_client/ids.py), so a replayed session
event publishes the same writes again, which the intake applies once. A session's events are
judged in the order applied (one session's events share a partition: the key is its id) against
its ledger and the events before them in the batch; one that breaks the rules
(processors/memory/sessions.py) is dead-lettered with its reason, and the rest of the batch
goes on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memstream_client.events import SESSION_EVENT_TYPES, MemoryWrite, SessionEvent, SessionSlept
from processors.events.errors import Rejected, Rejection
from processors.memory.sessions import SessionState, admitted, memory_writes
from schemas.topics import MEMORY_EVENTS, SESSIONS_EVENTS, destination
from stores.sessions import SessionEntry, SessionEventRow
from streams.plumbing.dead_letters import send_dead_letters
from streams.plumbing.llm_hook import handoff_prose
from streams.plumbing.messages import InboundMessage, Outbound
from streams.plumbing.runtime import Runtime
from streams.stages.parsing import ParsedBatch, parse_batch

Dead = list[tuple[InboundMessage, Rejection]]


@dataclass(frozen=True)
class _Admitted:
    message: InboundMessage
    event: SessionEvent
    # What the session woke for: a handoff's title.
    task: str
    row: SessionEventRow
    writes: list[MemoryWrite]


class SessionLedger:
    """Both stages in order: a batch's rules must see the previous batch in the ledger."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._attempts = runtime.attempts(SESSIONS_EVENTS)

    async def prepare(self, messages: Sequence[InboundMessage]
                      ) -> ParsedBatch[SessionEvent]:
        return parse_batch(self._runtime, messages, SESSION_EVENT_TYPES)

    async def complete(self, batch: ParsedBatch[SessionEvent]) -> None:
        runtime, attempts = self._runtime, self._attempts
        dead = list(batch.rejected)
        keys = {(p.event.namespace, p.event.payload.session_id) for _, p in batch.parsed}
        ledgers = await attempts.until_done(
            lambda: runtime.stores.sessions.session_ledgers(keys), what="session lookup")
        states = {key: state_of(entries) for key, entries in ledgers.items()}
        accepted: list[_Admitted] = []
        for message, parsed in batch.parsed:
            event = parsed.event
            key = (event.namespace, event.payload.session_id)
            try:
                state = admitted(states.get(key), event)
                writes = memory_writes(event, state.task)
            except Rejected as exc:
                dead.append((message, exc.rejection))
                continue
            states[key] = state
            accepted.append(_Admitted(message, event, state.task, row_of(event, message),
                                      writes))
            for name, count in parsed.sanitized.items():
                runtime.metrics.sanitized.labels(SESSIONS_EVENTS, name).inc(count)

        with runtime.stage("postgres"):
            ledger = await attempts.isolating(
                accepted,
                lambda part: runtime.stores.sessions.append_session_events(
                    [item.row for item in part]),
                what="session ledger append")
        dead += [(item.message, error.rejection) for item, error in ledger.failed]
        for item in ledger.done:
            runtime.metrics.events.labels(SESSIONS_EVENTS, item.row.type, "stored").inc()
        # After the ledger: a crash between the two replays the event, whose writes are
        # published again under the same ids.
        writes = [write for item in ledger.done for write in await self._rewritten(item)]
        outbound = [Outbound(*destination(write), write.model_dump_json().encode())
                    for write in writes]
        if outbound:
            await attempts.until_done(lambda: runtime.producer.produce(outbound),
                                      what="publishing session memories")
            runtime.metrics.produced.labels(MEMORY_EVENTS).inc(len(outbound))
        await send_dead_letters(runtime, dead)


    async def _rewritten(self, item: _Admitted) -> list[MemoryWrite]:
        """The item's writes, its handoff's text rewritten by the LLM hook when one is
        configured. A replay asks the hook again; the intake keeps the first text stored."""
        if not isinstance(item.event, SessionSlept) or self._runtime.llm is None:
            return item.writes
        (handoff,) = item.writes
        prose = await handoff_prose(self._runtime.llm, handoff.payload.text,
                                    self._runtime.metrics)
        return item.writes if prose is None else memory_writes(item.event, item.task, prose)


def state_of(ledger: Sequence[SessionEntry]) -> SessionState | None:
    """A session's state as its ledger says, each event applied in order."""
    state: SessionState | None = None
    for entry in ledger:
        event = SESSION_EVENT_TYPES[entry.type].model_validate(entry, from_attributes=True)
        state = admitted(state, event)
    return state


def row_of(event: SessionEvent, message: InboundMessage) -> SessionEventRow:
    return SessionEventRow(
        event_id=event.event_id, namespace=event.namespace,
        session_id=event.payload.session_id, agent_id=event.payload.agent_id,
        type=event.type, occurred_at=event.occurred_at, producer=event.producer,
        payload=event.payload.model_dump(mode="json"),
        provenance=message.provenance(event.event_id, event.producer))
