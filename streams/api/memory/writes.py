"""Writes over HTTP, for callers that would rather POST than speak Kafka, and what became of
each (`GET /v1/writes/{event_id}`).

Each request becomes the event a Kafka producer would publish: checked by the worker's own
intake parsing (processors/events/intake.py), published with the bytes so checked to the topic
and key the client's publisher uses (schemas/topics.py `destination`), and applied by the worker
like any other event. So every write takes one path. Its answer is its outcome once the worker
has decided it within the wait the request asks for (`wait=N` or `Prefer: wait=N`, seconds):
200 with the record that holds it (a new one, or the live memory it restates), the pending
diff it became, or why it was refused or dead-lettered. Not decided by then (or not waited
for): 202, `pending`, with `Location` where the outcome will be read.

An event the intake would dead-letter is answered 400 `{"error", "reason"}` with the reason
its dead letter would carry. What only the stores can tell (a related id or diff that does
not exist, a stale version, a transition the record's state forbids) is decided by the
worker later, and dead-lettered as for any event. A record the key cannot see (another
agent's personal memory) is answered 404, as one that does not exist.

The event's `producer` names the key (`http:<key id>`); a key bound to an agent writes as
that agent only; a review's reviewer is the key (`key:<key id>`), never the body, as is the
author of a scoring change (streams/api/memory/scoring_config.py).
"""

from __future__ import annotations

from typing import Any, TypeVar

from faust.web import Request, Response, View

from memstream_client.answers.writes import (
    BlockEditAccepted,
    ChangeAccepted,
    MemoryWritten,
    WriteOutcome,
)
from memstream_client.events import (
    MemoryBlock,
    MemoryDeprecate,
    MemoryRestore,
    MemoryReview,
    MemoryUpdate,
    MemoryWrite,
)
from processors.api.access import Caller
from processors.api.openapi import payload_body
from processors.api.parameters import IDENTIFIER
from processors.events.intake import json_object
from streams.api.auth import granted_namespace, may_see
from streams.api.pages import Pages, ViewHandler, no_record
from streams.api.params import NAMESPACE_PARAMS, Param, Params
from streams.api.publishing import (
    POST,
    WAIT_PARAMS,
    EventGate,
    actor_of,
    answering,
    decided,
    envelope_of,
    outcome_answer,
    payload_fields,
    permitted,
)
from streams.plumbing.runtime import Runtime

# The changes of a stored memory that name it in their path.
C = TypeVar("C", MemoryUpdate, MemoryDeprecate, MemoryRestore)

# A change of a stored memory names it in its path.
CHANGE_PARAMS: Params = {**WAIT_PARAMS, "record_id": Param(IDENTIFIER)}
OUTCOME_PARAMS: Params = {**NAMESPACE_PARAMS, **WAIT_PARAMS, "event_id": Param(IDENTIFIER)}


class WriteViews:
    """The handlers of the write routes (see `wire_writes`)."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._gate = EventGate(runtime.producer, runtime.max_event_bytes)

    async def _body(self, request: Request) -> dict[str, Any]:
        return json_object(await request.read(), self._runtime.max_event_bytes)

    async def write(self, web: View, request: Request, caller: Caller) -> MemoryWritten:
        body = await self._body(request)
        permitted(caller, body, "write")
        payload = payload_fields(body)
        agent_id = caller.writer_for(payload.get("agent_id"))
        if agent_id is not None:
            payload["agent_id"] = agent_id
        raw, parsed = self._gate.checked(envelope_of("memory.write", body, payload, caller),
                                         {"memory.write": MemoryWrite})
        published = await self._gate.publish(raw, parsed.event)
        namespace, event_id = parsed.event.namespace, published.event_id
        found = await decided(self._runtime, request, namespace, [event_id])
        return outcome_answer(MemoryWritten, namespace, event_id, found.get(event_id),
                              topic=published.topic)

    def change(self, event_type: str, model: type[C]) -> ViewHandler:
        """The route of one change of a stored memory, named by its path's record_id."""

        async def change(web: View, request: Request, caller: Caller,
                         record_id: str) -> Response | ChangeAccepted:
            body = await self._body(request)
            permitted(caller, body, "write")
            payload = {**payload_fields(body), "record_id": record_id}
            raw, parsed = self._gate.checked(envelope_of(event_type, body, payload, caller),
                                             {event_type: model})
            namespace = parsed.event.namespace
            if not await may_see(self._runtime.stores.records, caller, namespace, record_id):
                return no_record(web, record_id, namespace)
            published = await self._gate.publish(raw, parsed.event)
            return await self._outcome(request, namespace, published.event_id, record_id)

        return change

    async def review(self, web: View, request: Request,
                     caller: Caller) -> Response | ChangeAccepted:
        body = await self._body(request)
        permitted(caller, body, "review")
        payload = {**payload_fields(body), "reviewer": actor_of(caller)}
        raw, parsed = self._gate.checked(envelope_of("memory.review", body, payload, caller),
                                         {"memory.review": MemoryReview})
        event = parsed.event
        namespace, target = event.namespace, event.payload
        if target.block is not None:
            if not caller.sees("personal", target.block.agent_id):
                return web.json({"error": f"no block {target.block.label!r} for "
                                          f"{target.block.agent_id!r} in {namespace!r}"},
                                status=404)
        elif target.record_id is not None and \
                not await may_see(self._runtime.stores.records, caller, namespace,
                                  target.record_id):
            return no_record(web, target.record_id, namespace)
        published = await self._gate.publish(raw, event)
        return await self._outcome(request, namespace, published.event_id, target.record_id)

    async def edit_block(self, web: View, request: Request, caller: Caller,
                         label: str) -> BlockEditAccepted:
        body = await self._body(request)
        permitted(caller, body, "write")
        payload = {**payload_fields(body), "label": label,
                   "agent_id": caller.writer_for(body.get("agent_id"))}
        raw, parsed = self._gate.checked(envelope_of("memory.block", body, payload, caller),
                                         {"memory.block": MemoryBlock})
        published = await self._gate.publish(raw, parsed.event)
        namespace, event_id = parsed.event.namespace, published.event_id
        found = await decided(self._runtime, request, namespace, [event_id])
        return outcome_answer(BlockEditAccepted, namespace, event_id, found.get(event_id),
                              agent_id=parsed.event.payload.agent_id, label=label)

    async def _outcome(self, request: Request, namespace: str, event_id: str,
                       record_id: str | None) -> ChangeAccepted:
        """A change's outcome within the wait asked; pending, it names the record the change
        is for."""
        found = (await decided(self._runtime, request, namespace, [event_id])).get(event_id)
        answer = outcome_answer(ChangeAccepted, namespace, event_id, found)
        return answer if found is not None else answer.model_copy(
            update={"record_id": record_id})

    async def outcome(self, web: View, request: Request, caller: Caller,
                      event_id: str) -> Response | WriteOutcome:
        """What became of a write: stored, restated, changed, proposed, refused,
        dead-lettered, or pending; `wait` waits for it to be decided."""
        namespace = granted_namespace(caller, request.query)
        found = (await decided(self._runtime, request, namespace, [event_id])).get(event_id)
        # Whose record it is decides who may read what became of it, as for the record.
        if found is not None and found.scope == "personal" and \
                not caller.sees("personal", found.agent_id):
            return web.json({"error": f"no write {event_id!r} in {namespace!r}"}, status=404)
        return outcome_answer(WriteOutcome, namespace, event_id, found)


def wire_writes(pages: Pages, runtime: Runtime) -> ViewHandler:
    """The write routes; the block edit is returned, for the route of the block's read view
    to answer its POST."""
    views = WriteViews(runtime)
    pages.page("/v1/writes/{event_id}", params=OUTCOME_PARAMS, answer=WriteOutcome)(
        views.outcome)
    pages.page("/v1/memories", params=WAIT_PARAMS, methods=POST, answer=MemoryWritten,
               body=payload_body(MemoryWrite))(answering(views.write))
    pages.page("/v1/memories/{record_id}/update", params=CHANGE_PARAMS, methods=POST,
               answer=ChangeAccepted, body=payload_body(MemoryUpdate, filled={"record_id"}))(
        answering(views.change("memory.update", MemoryUpdate)))
    pages.page("/v1/memories/{record_id}/deprecate", params=CHANGE_PARAMS, methods=POST,
               answer=ChangeAccepted, body=payload_body(MemoryDeprecate, filled={"record_id"}))(
        answering(views.change("memory.deprecate", MemoryDeprecate)))
    pages.page("/v1/memories/{record_id}/restore", params=CHANGE_PARAMS, methods=POST,
               answer=ChangeAccepted, body=payload_body(MemoryRestore, filled={"record_id"}))(
        answering(views.change("memory.restore", MemoryRestore)))
    pages.page("/v1/reviews", params=WAIT_PARAMS, methods=POST, answer=ChangeAccepted,
               body=payload_body(MemoryReview, filled={"reviewer"}))(answering(views.review))
    return answering(views.edit_block)
