"""Writes over HTTP, for callers that would rather POST than speak Kafka.

Each request becomes the event a Kafka producer would publish: checked by the worker's own
intake parsing (processors/events/intake.py), published with the bytes so checked to the topic and
key the client's publisher uses (schemas/topics.py `destination`), and applied by the worker
like any other event. So every write takes one path, and the answer is 202: accepted, not
applied yet.

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

import asyncio
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import wraps
from typing import Any, TypeVar

from faust.web import Request, Response, View

from processors.api.access import Caller, Permission
from processors.api.openapi import event_body, payload_body
from processors.api.parameters import IDENTIFIER
from processors.events.errors import Unavailable
from processors.events.ids import memory_record_id
from processors.events.intake import Parsed, json_object, parse_event
from schemas.events import (
    RUN_EVENT_TYPES,
    DocumentEvent,
    MemoryBlock,
    MemoryDeprecate,
    MemoryEvent,
    MemoryRestore,
    MemoryReview,
    MemoryUpdate,
    MemoryWrite,
    PlanningEvent,
    RunEvent,
    SessionEvent,
)
from schemas.topics import destination
from streams.api.auth import may_see
from streams.api.pages import Pages, ViewHandler, no_record
from streams.api.params import NO_PARAMS, Param, Params
from streams.plumbing.failures import classify
from streams.plumbing.messages import Outbound
from streams.plumbing.runtime import Producer, Runtime

E = TypeVar("E", bound=RunEvent | MemoryEvent | SessionEvent | DocumentEvent | PlanningEvent)
# The changes of a stored memory that name it in their path.
C = TypeVar("C", MemoryUpdate, MemoryDeprecate, MemoryRestore)

# How long a request waits for the broker's acknowledgement before answering 503.
PUBLISH_TIMEOUT_S = 10.0
# Body fields that belong to the envelope, not to the payload.
ENVELOPE_FIELDS = frozenset({"namespace", "event_id"})
POST = ("POST",)
# A change of a stored memory names it in its path.
CHANGE_PARAMS: Params = {"record_id": Param(IDENTIFIER)}


class NotPublished(Exception):
    """The broker did not acknowledge the event in time: it may or may not have it."""

    def __init__(self, event_id: str, detail: str) -> None:
        super().__init__(f"Kafka is unavailable ({detail}): the event may not have been "
                         f"published; retry with the same event_id ({event_id}), which the "
                         "worker applies once")
        self.event_id = event_id


@dataclass(frozen=True)
class Published:
    event_id: str
    topic: str


class EventGate:
    """Checks an event as the worker's intake will, and publishes it as it was checked."""

    def __init__(self, producer: Producer, max_event_bytes: int,
                 timeout_s: float = PUBLISH_TIMEOUT_S) -> None:
        self._producer = producer
        self._max_event_bytes = max_event_bytes
        self._timeout_s = timeout_s

    def checked(self, document: dict[str, Any],
                accepted: Mapping[str, type[E]]) -> tuple[bytes, Parsed[E]]:
        """The event's bytes and the event they parse into; `Rejected` if the worker would
        dead-letter them."""
        raw = json.dumps(document).encode()
        return raw, parse_event(raw, accepted, self._max_event_bytes)

    async def publish(self, raw: bytes, event: RunEvent | MemoryEvent | SessionEvent
                      | DocumentEvent | PlanningEvent) -> Published:
        topic, key = destination(event)
        try:
            await asyncio.wait_for(self._producer.produce([Outbound(topic, key, raw)]),
                                   self._timeout_s)
        except TimeoutError:
            raise NotPublished(event.event_id,
                               f"no acknowledgement within {self._timeout_s:g}s") from None
        except Exception as exc:
            error = classify(exc)
            if isinstance(error, Unavailable):
                raise NotPublished(event.event_id, error.detail) from None
            raise
        return Published(event.event_id, topic)


def envelope_of(event_type: str, body: Mapping[str, Any], payload: dict[str, Any],
                caller: Caller) -> dict[str, Any]:
    """The event a request asks for: its namespace and event_id (a new one unless given)
    from the body, its producer from the key."""
    return {
        "event_id": body.get("event_id") or uuid.uuid4().hex,
        "type": event_type,
        "namespace": body.get("namespace"),
        "occurred_at": datetime.now(UTC).isoformat(),
        "producer": producer_of(caller),
        "payload": payload,
    }


def producer_of(caller: Caller) -> str:
    return f"http:{caller.key_id}"


def actor_of(caller: Caller) -> str:
    """Who a change made with the key is by: a review's reviewer, a scoring change's author."""
    return f"key:{caller.key_id}"


def payload_fields(body: Mapping[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in body.items() if name not in ENVELOPE_FIELDS}


def permitted(caller: Caller, body: Mapping[str, Any], permission: Permission) -> None:
    """Refuse (403) a key that may not `permission` in the body's namespace. A namespace that
    is no string is left to validation, which refuses it: no such event is published."""
    namespace = body.get("namespace")
    if isinstance(namespace, str) and namespace:
        caller.check(permission, namespace)


def run_fields(body: dict[str, Any], caller: Caller) -> dict[str, Any]:
    """A run event as posted, with its producer from the key; `occurred_at` may be given (an
    orchestrator posting events it buffered), and a bound key starts runs as its agent."""
    document = {**body, "event_id": body.get("event_id") or uuid.uuid4().hex,
                "occurred_at": body.get("occurred_at") or datetime.now(UTC).isoformat(),
                "producer": producer_of(caller)}
    payload = document.get("payload")
    if document.get("type") == "run.started" and isinstance(payload, dict):
        agent = caller.writer_for(payload.get("agent") or None)
        if agent is not None:
            document["payload"] = {**payload, "agent": agent}
    return document


def answering(handler: ViewHandler) -> ViewHandler:
    """A broker away answered 503, with the event id to retry with. (An event the intake
    would refuse is answered 400 by every view: streams/api/pages.py.)"""

    @wraps(handler)
    async def answered(web: View, request: Request, **kwargs: Any) -> Response:
        try:
            return await handler(web, request, **kwargs)
        except NotPublished as exc:
            return web.json({"error": str(exc), "event_id": exc.event_id}, status=503)

    return answered


class WriteViews:
    """The handlers of the write routes (see `wire_writes`)."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._gate = EventGate(runtime.producer, runtime.max_event_bytes)

    async def _body(self, request: Request) -> dict[str, Any]:
        return json_object(await request.read(), self._runtime.max_event_bytes)

    async def write(self, web: View, request: Request, caller: Caller) -> Response:
        body = await self._body(request)
        permitted(caller, body, "write")
        payload = payload_fields(body)
        agent_id = caller.writer_for(payload.get("agent_id"))
        if agent_id is not None:
            payload["agent_id"] = agent_id
        raw, parsed = self._gate.checked(envelope_of("memory.write", body, payload, caller),
                                         {"memory.write": MemoryWrite})
        published = await self._gate.publish(raw, parsed.event)
        return web.json({"record_id": memory_record_id(parsed.event.namespace,
                                                       published.event_id),
                         "event_id": published.event_id, "topic": published.topic},
                        status=202)

    def change(self, event_type: str, model: type[C]) -> ViewHandler:
        """The route of one change of a stored memory, named by its path's record_id."""

        async def change(web: View, request: Request, caller: Caller,
                         record_id: str) -> Response:
            body = await self._body(request)
            permitted(caller, body, "write")
            payload = {**payload_fields(body), "record_id": record_id}
            raw, parsed = self._gate.checked(envelope_of(event_type, body, payload, caller),
                                             {event_type: model})
            namespace = parsed.event.namespace
            if not await may_see(self._runtime.stores.records, caller, namespace, record_id):
                return no_record(web, record_id, namespace)
            published = await self._gate.publish(raw, parsed.event)
            return web.json({"record_id": record_id, "event_id": published.event_id},
                            status=202)

        return change

    async def review(self, web: View, request: Request, caller: Caller) -> Response:
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
        return web.json({"record_id": target.record_id, "event_id": published.event_id},
                        status=202)

    async def edit_block(self, web: View, request: Request, caller: Caller,
                         label: str) -> Response:
        body = await self._body(request)
        permitted(caller, body, "write")
        payload = {**payload_fields(body), "label": label,
                   "agent_id": caller.writer_for(body.get("agent_id"))}
        raw, parsed = self._gate.checked(envelope_of("memory.block", body, payload, caller),
                                         {"memory.block": MemoryBlock})
        published = await self._gate.publish(raw, parsed.event)
        return web.json({"agent_id": parsed.event.payload.agent_id, "label": label,
                         "event_id": published.event_id}, status=202)

    async def run_event(self, web: View, request: Request, caller: Caller) -> Response:
        body = await self._body(request)
        permitted(caller, body, "write")
        raw, parsed = self._gate.checked(run_fields(body, caller), RUN_EVENT_TYPES)
        published = await self._gate.publish(raw, parsed.event)
        return web.json({"event_id": published.event_id,
                         "run_id": parsed.event.payload.run_id}, status=202)


def wire_writes(pages: Pages, runtime: Runtime) -> ViewHandler:
    """The write routes; the block edit is returned, for the route of the block's read view
    to answer its POST."""
    views = WriteViews(runtime)
    pages.page("/v1/memories", params=NO_PARAMS, methods=POST,
               body=payload_body(MemoryWrite))(answering(views.write))
    pages.page("/v1/memories/{record_id}/update", params=CHANGE_PARAMS, methods=POST,
               body=payload_body(MemoryUpdate, filled={"record_id"}))(
        answering(views.change("memory.update", MemoryUpdate)))
    pages.page("/v1/memories/{record_id}/deprecate", params=CHANGE_PARAMS, methods=POST,
               body=payload_body(MemoryDeprecate, filled={"record_id"}))(
        answering(views.change("memory.deprecate", MemoryDeprecate)))
    pages.page("/v1/memories/{record_id}/restore", params=CHANGE_PARAMS, methods=POST,
               body=payload_body(MemoryRestore, filled={"record_id"}))(
        answering(views.change("memory.restore", MemoryRestore)))
    pages.page("/v1/reviews", params=NO_PARAMS, methods=POST,
               body=payload_body(MemoryReview, filled={"reviewer"}))(answering(views.review))
    pages.page("/v1/runs/events", params=NO_PARAMS, methods=POST,
               body=event_body("RunEventBody", list(RUN_EVENT_TYPES.values())))(
        answering(views.run_event))
    return answering(views.edit_block)
