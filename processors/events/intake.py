"""Turn the raw bytes of a Kafka message into a typed event, or into a rejection that says
why, in terms an operator can act on. Every rejection goes to the topic's DLQ.

`parse_event` never raises anything but `Rejected`, whatever the bytes: any JSON, any nesting,
any number, any string.

Text Postgres cannot store: U+0000, and lone UTF-16 surrogates (which have no UTF-8 form).
In prose fields (a payload's `PROSE`: memory text and title, run intent, step text, status
and error, summaries, next steps) U+0000 is removed and a lone surrogate becomes U+FFFD, and
`Parsed.sanitized` counts the characters changed per field, for the record to keep. Anywhere
else (ids, namespace, producer, tags, refs, commits, paths) they would change what the value
names, so the event is dead-lettered as `invalid_text`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from processors.events.errors import Rejected, Unexpected

E = TypeVar("E", bound=BaseModel)

# U+0000 and the surrogate code points, which a Python str may hold and UTF-8 may not.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


@dataclass(frozen=True)
class Parsed(Generic[E]):
    event: E
    # Characters removed or replaced per prose field ("text", "next_steps", ...).
    sanitized: Mapping[str, int] = field(default_factory=dict)


def parse_event(raw: bytes | None, accepted: Mapping[str, type[E]], max_bytes: int) -> Parsed[E]:
    """Parse and validate one message value into one of the `accepted` event types (by the
    envelope's `type`); raise `Rejected` if it is unusable, and nothing else."""
    with _only_rejections():
        return _parse(raw, accepted, max_bytes)


def json_object(raw: bytes | None, max_bytes: int) -> dict[str, Any]:
    """The JSON object of a message value (or of an HTTP body that becomes one); raise
    `Rejected` (malformed_json, oversized, not_an_object) if it is none, and nothing else."""
    with _only_rejections():
        return _json_object(raw, max_bytes)


@contextmanager
def _only_rejections() -> Iterator[None]:
    try:
        yield
    except Rejected:
        raise
    except Exception as exc:
        # A rule missed a way to fail: still this event's fault, still a dead letter.
        raise Rejected("invalid_event", Unexpected.of(exc).detail) from None


def _json_object(raw: bytes | None, max_bytes: int) -> dict[str, Any]:
    if raw is None or not raw.strip():
        raise Rejected("malformed_json", "empty message value")
    if len(raw) > max_bytes:
        raise Rejected("oversized", f"{len(raw)} bytes exceeds the limit of {max_bytes}")
    document = _json_document(raw)
    if not isinstance(document, dict):
        raise Rejected("not_an_object", f"expected a JSON object, got {type(document).__name__}")
    return document


def _parse(raw: bytes | None, accepted: Mapping[str, type[E]], max_bytes: int) -> Parsed[E]:
    document = _json_object(raw, max_bytes)
    event_type = document.get("type")
    if not isinstance(event_type, str) or event_type not in accepted:
        shown = event_type if isinstance(event_type, str | None) else type(event_type).__name__
        raise Rejected(
            "unknown_type", f"type {_clip(repr(shown))} is not one of {', '.join(sorted(accepted))}"
        )
    if not document.get("namespace"):
        raise Rejected("missing_namespace", "the envelope has no namespace")
    model = accepted[event_type]
    sanitized = _sanitize_prose(document, _prose_fields(model))
    _refuse_unstorable_text(document)
    try:
        return Parsed(model.model_validate(document), sanitized)
    except ValidationError as exc:
        raise Rejected("invalid_event", _summary(exc)) from None


def _json_document(raw: bytes) -> Any:
    try:
        return json.loads(raw, parse_constant=_refuse_constant)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise Rejected("malformed_json", str(exc)) from None
    except RecursionError:
        raise Rejected("malformed_json", "nested too deeply") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise Rejected("malformed_json", _clip(str(exc))) from None


def _refuse_constant(name: str) -> Any:
    raise Rejected("malformed_json", f"{name} is not JSON")


def _prose_fields(model: type[BaseModel]) -> frozenset[str]:
    payload = model.model_fields["payload"].annotation
    prose: frozenset[str] = getattr(payload, "PROSE", frozenset())
    return prose


def _sanitize_prose(document: dict[str, Any], prose: frozenset[str]) -> dict[str, int]:
    payload = document.get("payload")
    if not isinstance(payload, dict):
        return {}
    changed: Counter[str] = Counter()
    for name in sorted(prose & payload.keys()):
        value = payload[name]
        if isinstance(value, str):
            payload[name], changed[name] = _storable(value)
        elif isinstance(value, list):
            items = []
            for item in value:
                if isinstance(item, str):
                    item, count = _storable(item)
                    changed[name] += count
                items.append(item)
            payload[name] = items
    return {name: count for name, count in changed.items() if count}


def _storable(text: str) -> tuple[str, int]:
    """`text` without U+0000 and with U+FFFD for each lone surrogate; how many changed."""
    count = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal count
        count += 1
        return "" if match.group() == "\x00" else "\ufffd"

    return _UNSTORABLE.sub(replace, text), count


def unstorable_character(text: str) -> str | None:
    """What `text` holds that Postgres cannot store ("U+0000", "a lone surrogate"), if any."""
    found = _UNSTORABLE.search(text)
    if found is None:
        return None
    return "U+0000" if found.group() == "\x00" else "a lone surrogate"


def _refuse_unstorable_text(document: Any) -> None:
    """Reject the event if any string or key still holds text Postgres cannot store."""
    pending: list[tuple[str, Any]] = [("", document)]
    while pending:  # a loop, not recursion: documents may nest as deep as the parser allows
        path, value = pending.pop()
        if isinstance(value, str):
            what = unstorable_character(value)
            if what is not None:
                raise Rejected("invalid_text", f"{path or '<root>'} holds {what}, which cannot "
                                               "be stored; only prose fields are cleaned")
        elif isinstance(value, dict):
            for key, item in value.items():
                if _UNSTORABLE.search(key):
                    raise Rejected("invalid_text", f"a key under {path or '<root>'} holds "
                                                   "U+0000 or a lone surrogate")
                pending.append((f"{path}.{key}" if path else key, item))
        elif isinstance(value, list):
            pending.extend((f"{path}[{index}]", item) for index, item in enumerate(value))


def _summary(exc: ValidationError, limit: int = 5) -> str:
    problems = [
        f"{'.'.join(str(part) for part in error['loc']) or '<root>'}: {error['msg']}"
        for error in exc.errors(include_input=False, include_url=False)[:limit]
    ]
    more = exc.error_count() - limit
    return _clip("; ".join(problems) + (f"; and {more} more" if more > 0 else ""), 2000)


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else f"{text[:limit]}…"
