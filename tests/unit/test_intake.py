import json
from datetime import UTC, datetime, timedelta

import pytest

from memstream_client.events import MEMORY_EVENT_TYPES, RUN_EVENT_TYPES, MemoryWrite, RunFinished
from processors.events.errors import Rejected
from processors.events.intake import parse_event

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
    event = parse_event(json.dumps(memory_write()).encode(), MEMORY_EVENT_TYPES, MAX).event
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
    event = parse_event(raw, RUN_EVENT_TYPES, MAX).event
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


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"[" * 5000 + b"]" * 5000, "malformed_json"),
        (b'{"type": "memory.write", "n": ' + b"9" * 5000 + b"}", "malformed_json"),
        (b'{"type": "memory.write", "n": NaN}', "malformed_json"),
        (b'{"type": "memory.write", "n": -Infinity}', "malformed_json"),
        (b"   ", "malformed_json"),
        (b'"just a string"', "not_an_object"),
        (b"null", "not_an_object"),
        (json.dumps(memory_write(type=["memory.write"])).encode(), "unknown_type"),
        (json.dumps(memory_write(type={"a": 1})).encode(), "unknown_type"),
        (json.dumps(memory_write(namespace=["team-a"])).encode(), "invalid_event"),
        (json.dumps(memory_write(payload=["text"])).encode(), "invalid_event"),
        (json.dumps(memory_write(payload={"text": 42})).encode(), "invalid_event"),
        (json.dumps(memory_write(payload={"text": "t", "tags": "ops"})).encode(),
         "invalid_event"),
        (json.dumps(memory_write(schema_version=2)).encode(), "invalid_event"),
        (json.dumps(memory_write(occurred_at="2026-02-30T00:00:00Z")).encode(), "invalid_event"),
        (json.dumps(memory_write(occurred_at="yesterday")).encode(), "invalid_event"),
        # An offset that pushes the moment past year 9999 in UTC.
        (json.dumps(memory_write(occurred_at="9999-12-31T23:00:00-14:00")).encode(),
         "invalid_event"),
        (json.dumps(memory_write(payload={"text": "t", "expires_at": "0001-01-01T00:00:00+01:00"})
                    ).encode(), "invalid_event"),
        (json.dumps(memory_write(payload={"text": "\u0000"})).encode(), "invalid_event"),
    ],
)
def test_pathological_messages_are_rejected_not_raised(raw: bytes, reason: str) -> None:
    assert reason_of(raw) == reason


@pytest.mark.parametrize(
    ("overrides", "where"),
    [
        ({"event_id": "e\u0000-1"}, "event_id"),
        ({"producer": "tests\u0000"}, "producer"),
        ({"namespace": "team\u0000a"}, "namespace"),
        ({"payload": {"text": "t", "tags": ["ops\u0000"]}}, "payload.tags[0]"),
        ({"payload": {"text": "t", "source_ref": "wiki\u0000#vpn"}}, "payload.source_ref"),
        ({"payload": {"text": "t", "agent_id": "ann\ud800", "scope": "personal"}},
         "payload.agent_id"),
        ({"payload": {"text": "t", "re\u0000lated": 1}}, "a key under payload"),
    ],
)
def test_nul_or_a_lone_surrogate_outside_prose_is_invalid_text(
    overrides: dict[str, object], where: str
) -> None:
    raw = json.dumps(memory_write(**overrides)).encode()
    with pytest.raises(Rejected) as caught:
        parse_event(raw, MEMORY_EVENT_TYPES, MAX)
    assert caught.value.rejection.reason == "invalid_text"
    assert caught.value.rejection.detail.startswith(where)


def test_nul_and_lone_surrogates_in_prose_are_cleaned_and_counted() -> None:
    # json.dumps escapes both, as any producer of such text would.
    payload = {"text": "dep\x00loy \ud83d needs\x00 VPN", "title": "ok"}
    parsed = parse_event(json.dumps(memory_write(payload=payload)).encode(),
                         MEMORY_EVENT_TYPES, MAX)
    assert isinstance(parsed.event, MemoryWrite)
    assert parsed.event.payload.text == "deploy \ufffd needs VPN"
    assert parsed.sanitized == {"text": 3}


def test_prose_of_run_events_is_cleaned_field_by_field() -> None:
    payload = {"run_id": "r1", "status": "failed", "error": "boom\u0000\u0000",
               "next_steps": ["retry\u0000", "page"], "commits": ["abc"]}
    raw = json.dumps(memory_write(type="run.finished", payload=payload)).encode()
    parsed = parse_event(raw, RUN_EVENT_TYPES, MAX)
    assert isinstance(parsed.event, RunFinished)
    assert (parsed.event.payload.error, parsed.event.payload.next_steps) == (
        "boom", ["retry", "page"])
    assert parsed.sanitized == {"error": 2, "next_steps": 1}
    commit = dict(payload, commits=["ab\u0000c"])
    assert reason_of(json.dumps(memory_write(type="run.finished", payload=commit)).encode(),
                     RUN_EVENT_TYPES) == "invalid_text"


def test_times_are_normalised_to_utc() -> None:
    raw = json.dumps(memory_write(occurred_at="2026-11-01T10:00:00+02:00")).encode()
    event = parse_event(raw, MEMORY_EVENT_TYPES, MAX).event
    assert event.occurred_at == datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
    assert event.occurred_at.utcoffset() == timedelta(0)
