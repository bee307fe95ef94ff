"""Dead letters as people read them: what is kept of each one (`DeadLetterEntry`), the error
class and retriable flag its reason stands for, the namespace it belongs to, and who may see it.

What is kept of a dead letter is safe to show: its first `HEAD_BYTES` bytes, its key and its
error, each as text with the secrets redacted (memstream_client/redaction.py) and U+0000 escaped,
which Postgres cannot store. A window well past the head is redacted before the head is cut
from it, so that a secret the cut would split is gone whole rather than half shown; not the
whole value, which may be 900 KiB that the redaction rules take seconds over.

Access: dead letters are an operator's view of what went wrong, and their bytes may be any
agent's personal memory, so they are shown to admin keys bound to no agent only. Such a key
of one namespace sees that namespace's dead letters; those of no namespace (the value did not
parse far enough to name one) only an operator's key (every namespace) sees.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import get_args

from pydantic import TypeAdapter, ValidationError

from memstream_client.events import Identifier, Namespace
from memstream_client.ids import dead_letter_id
from memstream_client.redaction import redact_secrets
from processors.api.access import Caller, Forbidden
from processors.events.errors import (
    BrokerRefused,
    DeadLetterReason,
    IndexRefused,
    MemstreamError,
    Rejected,
    StoreRefused,
    Unexpected,
)
from processors.events.intake import json_object

# What is kept of a dead letter's value: enough to recognise it, not to rebuild it.
HEAD_BYTES = 512
# The bytes redacted to cut a head from, at first; doubled while too little is left after the
# head (secrets redacted shrink it).
REDACTION_WINDOW = 4096
# A secret the window's end cuts may be left unrecognised, in the window's last characters
# (each rule wants some tens of a secret's characters to know it): a head ends at least this
# far before the end of what was redacted.
CUT_MARGIN = 256
MAX_KEY_BYTES = 256
# A reason or a topic a header names.
MAX_NAME_CHARS = 64
# The reason of a dead letter whose headers name none (not one of ours).
UNKNOWN_REASON = "unknown"

REASONS: tuple[str, ...] = get_args(DeadLetterReason)
# The classes that dead-letter with a reason of their own; Rejected gives the event's.
_OWN_REASON: dict[str, type[MemstreamError]] = {
    cls.reason: cls for cls in (StoreRefused, IndexRefused, BrokerRefused, Unexpected)}
_NAMESPACE: TypeAdapter[str] = TypeAdapter(Namespace)
# An event id, and an agent id, as an envelope and a payload take them.
_EVENT_ID: TypeAdapter[str] = TypeAdapter(Identifier)


def error_class_of(reason: str) -> type[MemstreamError] | None:
    """The class of processors/events/errors.py that dead-letters with `reason`; None for a reason
    that is not one of ours."""
    if reason in _OWN_REASON:
        return _OWN_REASON[reason]
    return Rejected if reason in REASONS else None


_CLASSES: tuple[type[MemstreamError], ...] = (Rejected, *_OWN_REASON.values())
# Each error class by name, with the reasons it dead-letters with.
ERROR_CLASSES: dict[str, frozenset[str]] = {
    cls.__name__: frozenset(r for r in REASONS if error_class_of(r) is cls) for cls in _CLASSES}


@dataclass(frozen=True)
class DeadLetterEntry:
    """One dead letter as kept: where it was dead-lettered and when, where its event was read
    (None for what its headers do not say), why, and the redacted first bytes of its value."""

    dead_letter_id: str
    dlq_topic: str
    dlq_partition: int
    dlq_offset: int
    dead_lettered_at: datetime
    source_topic: str | None
    source_partition: int | None
    source_offset: int | None
    namespace: str | None
    # The id of the event dead-lettered, when its value names one: what a write's outcome is
    # read by (stores/write_outcomes.py); and the agent whose personal memory it wrote, if it
    # did, who alone may read that outcome.
    event_id: str | None
    personal_agent: str | None
    key: str | None
    reason: str
    error: str
    head: str
    # Whether the whole value is UTF-8; if not, `head` shows its other bytes as \xNN.
    head_utf8: bool
    size: int
    # Cut to fit the dead-letter topic: `size` is the part kept, not the event's size.
    truncated: bool

    @property
    def error_class(self) -> str | None:
        found = error_class_of(self.reason)
        return None if found is None else found.__name__

    @property
    def retriable(self) -> bool | None:
        """Whether trying the event again can pass once the cause is fixed: the error
        class's flag; None for a reason that is not one of ours."""
        found = error_class_of(self.reason)
        return None if found is None else found.retriable


@dataclass(frozen=True)
class DeadLetterHeaders:
    """What a dead letter's headers say (streams/plumbing/dead_letters.py), as raw bytes."""

    reason: bytes | None = None
    error: bytes | None = None
    source_topic: bytes | None = None
    source_partition: bytes | None = None
    source_offset: bytes | None = None
    truncated: bytes | None = None


def dead_letter_entry(dlq_topic: str, partition: int, offset: int, dead_lettered_at: datetime,
                      key: bytes | None, value: bytes,
                      headers: DeadLetterHeaders) -> DeadLetterEntry:
    """What is kept of the message at `dlq_topic`/`partition`/`offset`. Its id is a function
    of where its event was read, so that the same event dead-lettered twice (a worker that
    died before acknowledging it), or the dead-letter topic consumed again, is kept once; a
    message whose headers do not say where is named by its own place in the dead-letter
    topic."""
    source_topic = _header_text(headers.source_topic, MAX_NAME_CHARS)
    source_partition = _header_int(headers.source_partition)
    source_offset = _header_int(headers.source_offset)
    if source_topic is not None and source_partition is not None and source_offset is not None:
        identity = dead_letter_id(source_topic, source_partition, source_offset)
    else:
        identity = dead_letter_id(dlq_topic, partition, offset)
    head, utf8 = payload_head(value)
    return DeadLetterEntry(
        dead_letter_id=identity, dlq_topic=dlq_topic, dlq_partition=partition,
        dlq_offset=offset, dead_lettered_at=dead_lettered_at, source_topic=source_topic,
        source_partition=source_partition, source_offset=source_offset,
        namespace=namespace_of(value), event_id=event_id_of(value),
        personal_agent=personal_agent_of(value),
        key=None if key is None else shown_text(key, MAX_KEY_BYTES),
        reason=_header_text(headers.reason, MAX_NAME_CHARS) or UNKNOWN_REASON,
        error=_header_text(headers.error, None) or "",
        head=head, head_utf8=utf8, size=len(value), truncated=headers.truncated == b"true")


def payload_head(value: bytes, limit: int = HEAD_BYTES) -> tuple[str, bool]:
    """The first `limit` bytes of `value` as redacted text (whole characters only), and
    whether `value` is UTF-8 at all."""
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        utf8 = False
    else:
        utf8 = True
    return shown_text(value, limit), utf8


def shown_text(raw: bytes, limit: int) -> str:
    """`raw` as text that may be stored and shown: bytes that are not UTF-8 as \\xNN, U+0000
    as \\x00, secrets redacted, then cut to at most `limit` bytes of UTF-8."""
    window = REDACTION_WINDOW
    while True:
        text = raw[:window].decode("utf-8", "backslashreplace").replace("\x00", "\\x00")
        redacted = redact_secrets(text).text.encode()
        if window >= len(raw) or len(redacted) >= limit + CUT_MARGIN:
            return redacted[:limit].decode("utf-8", "ignore")
        window *= 2


def namespace_of(value: bytes) -> str | None:
    """The namespace a dead letter's value names, if it is a JSON object with a valid one."""
    return _named(value, "namespace", _NAMESPACE)


def event_id_of(value: bytes) -> str | None:
    """The event id a dead letter's value names, if it is a JSON object with one that an
    envelope takes."""
    return _named(value, "event_id", _EVENT_ID)


def personal_agent_of(value: bytes) -> str | None:
    """The agent a dead letter's value is personal to, if it is: a write of its personal
    memory (a payload of scope personal or user), or a step of its session (a session is
    its agent's alone: docs/sessions.md)."""
    try:
        event = json_object(value, max(len(value), 1))
    except Rejected:
        return None
    payload = event.get("payload")
    if not isinstance(payload, dict):
        return None
    owned = payload.get("scope") in ("personal", "user") or (
        isinstance(event.get("type"), str) and event["type"].startswith("session."))
    if not owned:
        return None
    try:
        return _EVENT_ID.validate_python(payload.get("agent_id"))
    except ValidationError:
        return None


def _named(value: bytes, field: str, rule: TypeAdapter[str]) -> str | None:
    try:
        return rule.validate_python(json_object(value, max(len(value), 1)).get(field))
    except (Rejected, ValidationError):
        return None


def dead_letter_scope(caller: Caller, requested: str | None) -> str | None:
    """The namespace whose dead letters a listing shows: the one requested, else the key's
    own; None (every namespace, and the dead letters of none) for an operator's key that
    names none. Raises `Forbidden` for a key that may not see them."""
    namespace = requested or caller.namespace
    if not (caller.may("admin", namespace) and caller.oversees_agents):
        raise Forbidden(f"key {caller.key_id} may not read the dead letters of "
                        + ("every namespace" if namespace is None else repr(namespace))
                        + "; that takes an admin key bound to no agent")
    return namespace


def may_see(caller: Caller, entry: DeadLetterEntry) -> bool:
    return caller.may("admin", entry.namespace) and caller.oversees_agents


def _header_text(raw: bytes | None, limit: int | None) -> str | None:
    if raw is None:
        return None
    text = raw.decode("utf-8", "replace").replace("\x00", "\\x00")
    return redact_secrets(text).text[:limit]


def _header_int(raw: bytes | None) -> int | None:
    try:
        return None if raw is None else int(raw)
    except ValueError:
        return None
