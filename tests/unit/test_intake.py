import json
from datetime import UTC, datetime

import pytest

from processors.intake import Rejected, parse_event
from schemas.events import MEMORY_EVENT_TYPES, RUN_EVENT_TYPES, MemoryWrite, RunFinished

MAX = 64 * 1024


def memory_write(**overrides: object) -> dict[str, object]:
    event: dict[str, object] = {
        "event_id": "e-1",
        "type": "memory.write",
        "namespace": "team-a",
        "occurred_at": datetime(2026, 11, 1, tzinfo=UTC).isoformat(),
        "producer": "tests",
        "payload": {"text": "The staging database needs the VPN."},
    }
    event.update(overrides)
    return event


def reason_of(raw: bytes | None, accepted: dict = MEMORY_EVENT_TYPES) -> str:  # type: ignore[type-arg]
    with pytest.raises(Rejected) as caught:
        parse_event(raw, accepted, MAX)
    return caught.value.rejection.reason


def test_a_valid_memory_write_parses() -> None:
    event = parse_event(json.dumps(memory_write()).encode(), MEMORY_EVENT_TYPES, MAX)
    assert isinstance(event, MemoryWrite)
    assert event.payload.memory_type == "fact"
    assert event.payload.scope == "shared"


def test_a_run_finished_parses_with_commits() -> None:
    raw = json.dumps(
        memory_write(
            type="run.finished",
            payload={"run_id": "r1", "status": "failed", "commits": ["abc123"], "error": "boom"},
        )
    ).encode()
    event = parse_event(raw, RUN_EVENT_TYPES, MAX)
    assert isinstance(event, RunFinished)
    assert event.payload.commits == ["abc123"]


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"{not json", "malformed_json"),
        (b"\xff\xfe", "malformed_json"),
        (None, "malformed_json"),
        (b"[1, 2]", "not_an_object"),
        (json.dumps(memory_write(type="memory.explode")).encode(), "unknown_type"),
        (json.dumps(memory_write(type=None)).encode(), "unknown_type"),
        (json.dumps(memory_write(namespace="")).encode(), "missing_namespace"),
        (json.dumps({k: v for k, v in memory_write().items() if k != "namespace"}).encode(),
         "missing_namespace"),
        (json.dumps(memory_write(namespace="has space")).encode(), "invalid_event"),
        (json.dumps(memory_write(occurred_at="2026-11-01T00:00:00")).encode(), "invalid_event"),
        (json.dumps(memory_write(payload={"text": ""})).encode(), "invalid_event"),
        (json.dumps(memory_write(extra_field=1)).encode(), "invalid_event"),
    ],
)
def test_unusable_messages_are_rejected_with_their_reason(raw: bytes | None, reason: str) -> None:
    assert reason_of(raw) == reason


def test_an_oversized_message_is_rejected_before_parsing() -> None:
    raw = json.dumps(memory_write(payload={"text": "x" * MAX})).encode()
    assert reason_of(raw) == "oversized"


def test_a_run_event_on_the_memory_topic_is_an_unknown_type() -> None:
    raw = json.dumps(memory_write(type="run.started", payload={"run_id": "r"})).encode()
    assert reason_of(raw) == "unknown_type"


def test_more_than_ten_related_ids_is_invalid() -> None:
    payload = {"text": "t", "related_ids": [f"mem_{i}" for i in range(11)]}
    raw = json.dumps(memory_write(payload=payload)).encode()
    with pytest.raises(Rejected) as caught:
        parse_event(raw, MEMORY_EVENT_TYPES, MAX)
    assert caught.value.rejection.reason == "invalid_event"
    assert "related_ids" in caught.value.rejection.detail


def test_a_personal_memory_needs_its_owner() -> None:
    raw = json.dumps(memory_write(payload={"text": "t", "scope": "personal"})).encode()
    with pytest.raises(Rejected) as caught:
        parse_event(raw, MEMORY_EVENT_TYPES, MAX)
    assert "agent_id" in caught.value.rejection.detail
