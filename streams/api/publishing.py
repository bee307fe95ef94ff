"""Publishing a write: the event a request asks for, checked as the worker's intake will check
it (processors/events/intake.py) and published with the bytes so checked to the topic and key
a client's publisher uses (schemas/topics.py `destination`). A broker that does not
acknowledge in time is answered 503 with the event id to retry with (the worker applies an
event once); an event the intake would refuse is answered 400 by every view
(streams/api/pages.py). A write may wait for the worker to decide it (`wait`, or RFC 7240's
`Prefer: wait=N`): its answer is then its outcome (streams/reads/writes.py), else `pending`
with where to read it. Shared by every view that publishes."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import wraps
from typing import Any, TypeVar
from urllib.parse import quote

from faust.web import Request, Response, View

from memstream_client.answers.base import Answer
from memstream_client.answers.review import AgentBlock
from memstream_client.answers.writes import WriteOutcome
from memstream_client.events import (
    DocumentEvent,
    MemoryEvent,
    PlanningEvent,
    RunEvent,
    SessionEvent,
)
from processors.api.access import Caller, Permission
from processors.api.parameters import number
from processors.events.errors import Unavailable
from processors.events.intake import Parsed, parse_event
from schemas.topics import destination
from stores.write_outcomes import WriteOutcome as StoredOutcome
from streams.api.pages import ViewHandler
from streams.api.params import Param, Params, optional
from streams.plumbing.failures import classify
from streams.plumbing.messages import Outbound
from streams.plumbing.runtime import Producer, Runtime
from streams.reads.writes import MAX_WAIT_S, outcomes_within

E = TypeVar("E", bound=RunEvent | MemoryEvent | SessionEvent | DocumentEvent | PlanningEvent)

# How long a request waits for the broker's acknowledgement before answering 503.
PUBLISH_TIMEOUT_S = 10.0

# Body fields that belong to the envelope, not to the payload.
ENVELOPE_FIELDS = frozenset({"namespace", "event_id"})

POST = ("POST",)


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


def answering(handler: ViewHandler) -> ViewHandler:
    """A broker away answered 503, with the event id to retry with. (An event the intake
    would refuse is answered 400 by every view: streams/api/pages.py.)"""

    @wraps(handler)
    async def answered(web: View, request: Request, **kwargs: Any) -> Response | Answer:
        try:
            return await handler(web, request, **kwargs)
        except NotPublished as exc:
            return web.json({"error": str(exc), "event_id": exc.event_id}, status=503)

    return answered


# The seconds a write may wait for its outcome: its `wait` parameter, or `Prefer: wait=N`.
WAIT = number(0.0, MAX_WAIT_S)
WAIT_PARAMS: Params = {"wait": Param(WAIT)}
_PREFERRED_WAIT = re.compile(r"(?:^|[\s,;])wait\s*=\s*\"?(\d+(?:\.\d+)?)\"?", re.IGNORECASE)
Answered = TypeVar("Answered", bound=WriteOutcome)


def wait_of(request: Request) -> float:
    """How long a write waits for its outcome: its `wait` parameter, else the header
    `Prefer: wait=N` (at most MAX_WAIT_S); not at all when it asks for neither."""
    asked = optional(request.query, "wait", WAIT)
    if asked is not None:
        return asked
    preferred = _PREFERRED_WAIT.search(request.headers.get("Prefer", ""))
    return 0.0 if preferred is None else min(float(preferred.group(1)), MAX_WAIT_S)


async def decided(runtime: Runtime, request: Request, namespace: str,
                  event_ids: Sequence[str], carrier: str | None = None
                  ) -> dict[str, StoredOutcome]:
    """The outcomes of these writes decided within the wait the request asks for (and the
    outcome of their `carrier` if it was dead-lettered: streams/reads/writes.py)."""
    return await outcomes_within(runtime.stores.writes, namespace, event_ids,
                                 wait_of(request), carrier)


def outcome_url(namespace: str, event_id: str) -> str:
    return f"/v1/writes/{quote(event_id, safe='')}?namespace={quote(namespace, safe='')}"


def outcome_answer(model: type[Answered], namespace: str, event_id: str,
                   found: StoredOutcome | None, **more: Any) -> Answered:
    """A write's outcome as `model` answers it (with `more` of the route's own fields):
    what was decided, or `pending`."""
    fields: dict[str, Any] = {"namespace": namespace, "event_id": event_id,
                              "outcome": "pending", "outcome_url": outcome_url(namespace,
                                                                               event_id)}
    if found is not None:
        fields.update(outcome=found.outcome, record_id=found.record_id, version=found.version,
                      diff_id=found.diff_id, reason=found.reason, detail=found.detail,
                      decided_at=found.decided_at)
        if found.block_label is not None and found.agent_id is not None:
            fields["block"] = AgentBlock(agent_id=found.agent_id, label=found.block_label)
    return model.model_validate({**fields, **more})
