"""Agent sessions over HTTP (seed 003; docs/sessions.md): wake, checkpoint, sleep, and the
session's ledger.

    POST /v1/sessions/wake                      {namespace, task, agent_id?, session_id?}
    POST /v1/sessions/{session_id}/checkpoint   {namespace, memories, agent_id?}
    POST /v1/sessions/{session_id}/sleep        {namespace, summary, next_steps?, agent_id?}
    GET  /v1/sessions/{session_id}?namespace=

Each POST publishes a session event to `sessions.events`, checked as the worker's intake
will check it (400 with the reason its dead letter would carry); the session stage applies it
(streams/stages/memory/session_ledger.py). Wake answers at once what the agent needs to start: its
last handoff, and the context pack for its task, whose core section holds its core blocks
(the pack of streams/reads/context.py: one way to pack them).

A session is an agent's: a key bound to an agent wakes, checkpoints and sleeps as that agent
only, and another agent's session answers 404 exactly as one that does not exist.
"""

from __future__ import annotations

import uuid
from typing import Any

from faust.web import Request, Response, View

from memstream_client.answers.recall import ContextPack
from memstream_client.answers.sessions import (
    Handoff,
    Session,
    SessionEventEntry,
    SessionStepAccepted,
    Woke,
)
from memstream_client.answers.writes import WriteOutcome
from memstream_client.events import SessionCheckpointed, SessionSlept, SessionWoke
from processors.api.access import Caller
from processors.api.openapi import payload_body
from processors.api.parameters import IDENTIFIER
from processors.events.intake import json_object
from processors.memory.sessions import handoff_event_id, memory_writes
from stores.sessions import SessionEntry
from streams.api.auth import granted_namespace
from streams.api.pages import Pages, ViewHandler
from streams.api.params import NAMESPACE_PARAMS, NO_PARAMS, Param, Params, parsed
from streams.api.publishing import (
    POST,
    WAIT_PARAMS,
    EventGate,
    answering,
    decided,
    envelope_of,
    outcome_answer,
    payload_fields,
    permitted,
)
from streams.api.queries import BUDGET_TOKENS
from streams.api.rendering import context_answer
from streams.plumbing.runtime import Runtime
from streams.reads.context import task_query
from streams.reads.recalls import Exhausted, Recalls
from streams.reads.search import DEFAULT_MIN_SCORE

WAKE_ROUTE = "/v1/sessions/wake"
SESSION_PARAMS: Params = {"session_id": Param(IDENTIFIER)}
LEDGER_PARAMS: Params = {**NAMESPACE_PARAMS, **SESSION_PARAMS}
STEP_PARAMS: Params = {**SESSION_PARAMS, **WAIT_PARAMS}
# Body fields of a wake that are not the event's: how large a pack it answers.
WAKE_ONLY = frozenset({"budget_tokens"})


class SessionViews:
    def __init__(self, runtime: Runtime, recalls: Recalls) -> None:
        self._runtime = runtime
        self._recalls = recalls
        self._gate = EventGate(runtime.producer, runtime.max_event_bytes)

    async def _body(self, request: Request) -> dict[str, Any]:
        return json_object(await request.read(), self._runtime.max_event_bytes)

    async def wake(self, web: View, request: Request, caller: Caller) -> Woke:
        body = await self._body(request)
        permitted(caller, body, "write")
        payload = {name: value for name, value in payload_fields(body).items()
                   if name not in WAKE_ONLY}
        payload["session_id"] = body.get("session_id") or uuid.uuid4().hex
        payload["agent_id"] = caller.writer_for(body.get("agent_id"))
        raw, checked = self._gate.checked(envelope_of("session.woke", body, payload, caller),
                                          {"session.woke": SessionWoke})
        event = checked.event
        namespace, agent = event.namespace, event.payload.agent_id
        # What wake answers is the agent's personal memory: read as that agent.
        caller.check("read", namespace)
        caller.reader_of(agent)
        budget = body.get("budget_tokens")
        budget_tokens = None if budget is None else parsed("budget_tokens", BUDGET_TOKENS,
                                                           str(budget))
        published = await self._gate.publish(raw, event)
        return Woke(
            namespace=namespace, session_id=event.payload.session_id, agent_id=agent,
            task=event.payload.task, event_id=published.event_id,
            handoff=await self._last_handoff(namespace, agent),
            context=await self._context(namespace, agent, event.payload.task, budget_tokens))

    async def _last_handoff(self, namespace: str, agent: str) -> Handoff | None:
        """The handoff of the agent's last session, once the intake has stored it."""
        slept = await self._runtime.stores.sessions.last_slept(namespace, agent)
        if slept is None:
            return None
        record_id = await self._handoff_record(namespace, slept.event_id)
        if record_id is None:
            return None
        record = (await self._runtime.stores.records.records_by_id(
            namespace, [record_id])).get(record_id)
        if record is None:
            return None
        return Handoff(record_id=record_id, session_id=slept.session_id, title=record.title,
                       text=record.text, next_steps=list(slept.payload.get("next_steps", [])),
                       slept_at=slept.occurred_at)

    async def _context(self, namespace: str, agent: str, task: str,
                       budget_tokens: int | None) -> ContextPack | None:
        """The context pack for the task, its core blocks first; for a session woken without
        a task, the core blocks alone; none when memory is disabled."""
        flags = self._recalls.flags
        if not flags.enabled:
            return None
        pack = await self._recalls.context(task_query(
            namespace, agent, task, flags.context_budget_tokens if budget_tokens is None
            else budget_tokens, DEFAULT_MIN_SCORE), WAKE_ROUTE)
        # A wake names no run: no budget refuses it.
        assert not isinstance(pack, Exhausted)
        return context_answer(pack)

    async def _handoff_record(self, namespace: str, slept_event_id: str) -> str | None:
        """The record that holds a sleep's handoff: the one its write stored, or the live
        memory it restates; None while undecided, or refused."""
        found = await self._runtime.stores.writes.outcome(
            namespace, handoff_event_id(namespace, slept_event_id))
        return None if found is None else found.record_id

    async def _ledger(self, namespace: str, session_id: str) -> list[SessionEntry]:
        return (await self._runtime.stores.sessions.session_ledgers(
            [(namespace, session_id)])).get((namespace, session_id), [])

    def step(self, event_type: str, model: type[SessionCheckpointed] | type[SessionSlept]
             ) -> ViewHandler:
        """The route of a checkpoint or a sleep of the session its path names."""

        async def step(web: View, request: Request, caller: Caller,
                       session_id: str) -> Response | SessionStepAccepted:
            body = await self._body(request)
            permitted(caller, body, "write")
            namespace = str(body.get("namespace") or "")
            # A namespace that is no string is refused by validation below. A session not in
            # the ledger yet (its wake still on its way) is the stage's to judge: it
            # dead-letters a step of a session that never woke.
            ledger = await self._ledger(namespace, session_id) \
                if isinstance(body.get("namespace"), str) and namespace else []
            owner = ledger[0].agent_id if ledger else None
            if owner is not None and not caller.sees("personal", owner):
                return no_session(web, session_id, namespace)
            agent = caller.writer_for(body.get("agent_id") or owner)
            if owner is not None and agent != owner:
                return no_session(web, session_id, namespace)
            payload = {**payload_fields(body), "session_id": session_id, "agent_id": agent}
            raw, checked = self._gate.checked(envelope_of(event_type, body, payload, caller),
                                              {event_type: model})
            event = checked.event
            # The memories it asks for must be writable, as the stage will check.
            writes = [write.event_id for write in memory_writes(event, "")]
            published = await self._gate.publish(raw, event)
            found = await decided(self._runtime, request, event.namespace, writes,
                                  carrier=published.event_id)
            # A step dead-lettered (of a session that never woke, say) writes none of its
            # memories: each is answered as the step's dead letter, with its reason.
            lost = found.get(published.event_id)
            return step_answer(session_id, published.event_id, event,
                               [outcome_answer(WriteOutcome, event.namespace, write,
                                               found.get(write) or lost) for write in writes])

        return step

    async def ledger(self, web: View, request: Request, caller: Caller,
                     session_id: str) -> Response | Session:
        namespace = granted_namespace(caller, request.query)
        ledger = await self._ledger(namespace, session_id)
        if not ledger or not caller.sees("personal", ledger[0].agent_id):
            return no_session(web, session_id, namespace)
        slept = next((entry for entry in ledger if entry.type == "session.slept"), None)
        handoff = None if slept is None else await self._handoff_record(namespace,
                                                                        slept.event_id)
        return ledger_view(namespace, session_id, ledger, handoff)


def step_answer(session_id: str, event_id: str, event: SessionCheckpointed | SessionSlept,
                writes: list[WriteOutcome]) -> SessionStepAccepted:
    """A step published, with the outcome of each memory it writes and the records that hold
    the decided ones: a checkpoint's, or a sleep's handoff."""
    held = [write.record_id for write in writes if write.record_id is not None]
    if isinstance(event, SessionCheckpointed):
        return SessionStepAccepted(session_id=session_id, event_id=event_id, writes=writes,
                                   record_ids=held)
    return SessionStepAccepted(session_id=session_id, event_id=event_id, writes=writes,
                               handoff_record_id=held[0] if held else None)


def ledger_view(namespace: str, session_id: str, ledger: list[SessionEntry],
                handoff_record: str | None) -> Session:
    """A session's ledger, with the record that holds its handoff (once decided)."""
    woke = ledger[0]
    slept = next((entry for entry in ledger if entry.type == "session.slept"), None)
    return Session(
        namespace=namespace, session_id=session_id, agent_id=woke.agent_id,
        task=woke.payload.get("task", ""),
        state="asleep" if slept is not None else "awake",
        woke_at=woke.occurred_at,
        slept_at=None if slept is None else slept.occurred_at,
        handoff_record_id=handoff_record,
        events=[SessionEventEntry(event_id=entry.event_id, type=entry.type,
                                  occurred_at=entry.occurred_at, producer=entry.producer,
                                  payload=entry.payload) for entry in ledger])


def no_session(web: View, session_id: str, namespace: str) -> Response:
    """The one answer for a session that does not exist and one the caller may not see."""
    return web.json({"error": f"no session {session_id!r} in {namespace!r}"}, status=404)


def wire_sessions(pages: Pages, runtime: Runtime, recalls: Recalls) -> None:
    views = SessionViews(runtime, recalls)
    # The first route that matches a path serves it: wake before the ledger's
    # /v1/sessions/{session_id}.
    pages.page(WAKE_ROUTE, params=NO_PARAMS, methods=POST, answer=Woke, body=payload_body(
        SessionWoke, optional={"session_id", "agent_id"},
        extra={"budget_tokens": BUDGET_TOKENS.schema}))(answering(views.wake))
    pages.page("/v1/sessions/{session_id}/checkpoint", params=STEP_PARAMS, methods=POST,
               answer=SessionStepAccepted,
               body=payload_body(SessionCheckpointed, filled={"session_id"},
                                 optional={"agent_id"}))(
        answering(views.step("session.checkpointed", SessionCheckpointed)))
    pages.page("/v1/sessions/{session_id}/sleep", params=STEP_PARAMS, methods=POST,
               answer=SessionStepAccepted,
               body=payload_body(SessionSlept, filled={"session_id"}, optional={"agent_id"}))(
        answering(views.step("session.slept", SessionSlept)))
    pages.page("/v1/sessions/{session_id}", params=LEDGER_PARAMS, answer=Session)(views.ledger)
