"""Turn the raw bytes of a Kafka message into a typed event, or into a rejection that says
why, in terms an operator can act on. Every rejection goes to the topic's DLQ."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, TypeVar

from pydantic import BaseModel, ValidationError

RejectReason = Literal[
    "oversized",
    "malformed_json",
    "not_an_object",
    "unknown_type",
    "missing_namespace",
    "invalid_event",
    "broken_reference",
]


@dataclass(frozen=True)
class Rejection:
    reason: RejectReason
    detail: str


class Rejected(Exception):
    """Raised by domain rules that refuse an otherwise well-formed event."""

    def __init__(self, reason: RejectReason, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.rejection = Rejection(reason, detail)


E = TypeVar("E", bound=BaseModel)


def parse_event(raw: bytes | None, accepted: Mapping[str, type[E]], max_bytes: int) -> E:
    """Parse and validate one message value into one of the `accepted` event types (by the
    envelope's `type`); raise `Rejected` if it is unusable."""
    if raw is None:
        raise Rejected("malformed_json", "empty message value")
    if len(raw) > max_bytes:
        raise Rejected("oversized", f"{len(raw)} bytes exceeds the limit of {max_bytes}")
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise Rejected("malformed_json", str(exc)) from None
    if not isinstance(document, dict):
        raise Rejected("not_an_object", f"expected a JSON object, got {type(document).__name__}")
    event_type = document.get("type")
    if not isinstance(event_type, str) or event_type not in accepted:
        raise Rejected(
            "unknown_type", f"type {event_type!r} is not one of {', '.join(sorted(accepted))}"
        )
    if not document.get("namespace"):
        raise Rejected("missing_namespace", "the envelope has no namespace")
    try:
        return accepted[event_type].model_validate(document)
    except ValidationError as exc:
        raise Rejected("invalid_event", _summary(exc)) from None


def _summary(exc: ValidationError, limit: int = 5) -> str:
    problems = [
        f"{'.'.join(str(part) for part in error['loc']) or '<root>'}: {error['msg']}"
        for error in exc.errors()[:limit]
    ]
    more = exc.error_count() - limit
    return "; ".join(problems) + (f"; and {more} more" if more > 0 else "")
