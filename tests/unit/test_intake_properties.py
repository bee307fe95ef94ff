"""Properties of intake, over inputs nobody wrote by hand: any bytes, any JSON document, any
string in any field. Parsing never raises anything but `Rejected` with a known reason, and
what it accepts becomes a record (or a ledger row) holding only text Postgres can store."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, get_args

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstream_client.events import (
    CONSOLIDATE_EVENT_TYPES,
    MEMORY_EVENT_TYPES,
    RUN_EVENT_TYPES,
    MemoryWrite,
    Provenance,
)
from processors.events.errors import DeadLetterReason, Rejected
from processors.events.intake import parse_event
from processors.memory.writes import memory_record
from processors.runs.fix_patterns import error_occurrences

MAX = 64 * 1024
REASONS = set(get_args(DeadLetterReason))
ALL_TYPES = {**RUN_EVENT_TYPES, **MEMORY_EVENT_TYPES, **CONSOLIDATE_EVENT_TYPES}
PROVENANCE = Provenance(source_event_id="e", source_topic="memory.events", source_partition=0,
                        source_offset=0, producer="p")

# Text as a producer may send it: any code point, and U+0000 and lone surrogates often.
TEXT = st.text(alphabet=st.one_of(
    st.characters(), st.sampled_from(["\x00", "\ud800", "\udfff", "\ud83d", "\ufffd"])))
JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), TEXT,
                         st.floats(allow_nan=False, allow_infinity=False))
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=5),
                            st.dictionaries(TEXT, inner, max_size=5)),
    max_leaves=30,
)

VALID: dict[str, dict[str, Any]] = {
    "memory.write": {"text": "The staging database needs the VPN.", "title": "VPN",
                     "tags": ["ops"], "source_ref": "wiki#vpn", "agent_id": "ann",
                     "scope": "personal"},
    "run.started": {"run_id": "r1", "intent": "Upgrade the SDK", "agent": "finn",
                    "task_key": "PAY-1", "repo": "acme/pay"},
    "run.step": {"run_id": "r1", "kind": "error", "text": "tests failed", "tool": "pytest",
                 "status": "red", "error": "KeyError: 'user-1'"},
    "run.artifact": {"run_id": "r1", "kind": "log", "ref": "s3://logs/1", "title": "log",
                     "summary": "the build log"},
    "run.finished": {"run_id": "r1", "status": "failed", "summary": "gave up",
                     "error": "Traceback (most recent call last):\n  boom", "commits": ["abc"],
                     "pull_requests": ["#1"], "files_changed": ["a.py"],
                     "next_steps": ["retry"]},
}


def envelope(event_type: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"event_id": "e-1", "type": event_type, "namespace": "team-a",
            "occurred_at": datetime(2026, 11, 1, tzinfo=UTC).isoformat(), "producer": "tests",
            "payload": payload}


def field_paths() -> Iterator[tuple[str, tuple[str, ...]]]:
    """Every string field of every event type: envelope fields and payload fields."""
    for event_type, payload in VALID.items():
        for name in ("event_id", "namespace", "producer"):
            yield event_type, (name,)
        for name, value in payload.items():
            yield event_type, ("payload", name) if not isinstance(value, list) \
                else ("payload", name, "0")


PATHS = sorted(field_paths())


def storable(value: Any) -> bool:
    """Whether every string in `value` can be written to Postgres (UTF-8, no U+0000)."""
    if isinstance(value, str):
        return "\x00" not in value and value.encode("utf-8", "strict") is not None
    if isinstance(value, dict):
        return all(storable(k) and storable(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return all(storable(item) for item in value)
    return True


def outcome(raw: bytes, accepted: dict[str, Any]) -> Any:
    """The parsed event, or the rejection's reason; anything else raised fails the test."""
    try:
        return parse_event(raw, accepted, MAX)
    except Rejected as exc:
        assert exc.rejection.reason in REASONS
        assert exc.rejection.detail
        return exc.rejection.reason


@given(st.binary(max_size=2000))
def test_any_bytes_parse_or_are_rejected(raw: bytes) -> None:
    outcome(raw, ALL_TYPES)


@given(JSON_VALUES)
def test_any_json_document_parses_or_is_rejected(document: Any) -> None:
    outcome(json.dumps(document).encode(), ALL_TYPES)


@given(st.dictionaries(TEXT, JSON_VALUES, max_size=8), st.sampled_from(sorted(VALID)))
def test_any_envelope_shaped_document_parses_or_is_rejected(
    extra: dict[str, Any], event_type: str
) -> None:
    document = {**envelope(event_type, VALID[event_type]), **extra}
    outcome(json.dumps(document).encode(), ALL_TYPES)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PATHS), TEXT)
def test_any_string_in_any_field_is_stored_cleanly_or_dead_lettered(
    path: tuple[str, tuple[str, ...]], text: str
) -> None:
    event_type, keys = path
    document = envelope(event_type, json.loads(json.dumps(VALID[event_type])))
    target: Any = document
    for key in keys[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]
    if isinstance(target, list):
        target[int(keys[-1])] = text
    else:
        target[keys[-1]] = text
    result = outcome(json.dumps(document).encode(), ALL_TYPES)
    if isinstance(result, str):
        return  # dead-lettered with a known reason
    event = result.event
    assert storable(event.model_dump(mode="json"))
    if isinstance(event, MemoryWrite):
        record = memory_record(event, PROVENANCE, result.sanitized)
        assert storable(record.model_dump(mode="json"))
    else:
        for occurrence in error_occurrences(event, PROVENANCE):
            assert storable([occurrence.message, occurrence.signature.template,
                             list(occurrence.signature.frames)])
