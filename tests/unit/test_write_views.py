import asyncio
import json
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest
from aiokafka.errors import KafkaConnectionError

from memstream_client.events import MEMORY_EVENT_TYPES, RUN_EVENT_TYPES, MemoryWrite
from processors.api.access import Caller, Forbidden
from processors.events.errors import Rejected
from processors.events.intake import json_object, parse_event
from publisher.kafka_publisher import validated
from schemas.topics import MEMORY_CONSOLIDATE, MEMORY_EVENTS, RUNS_EVENTS, destination
from streams.api.operations.runs import run_fields
from streams.api.publishing import EventGate, NotPublished, envelope_of
from streams.plumbing.messages import Outbound

MAX = 64 * 1024
OPERATOR = Caller("k0", None, frozenset({"admin"}), None)
ANN = Caller("k1", "team-a", frozenset({"write"}), "ann")


class RecordingProducer:
    def __init__(self, error: Exception | None = None, hang: bool = False) -> None:
        self.sent: list[Outbound] = []
        self._error = error
        self._hang = hang

    async def produce(self, messages: Sequence[Outbound]) -> None:
        if self._hang:
            await asyncio.sleep(3600)
        if self._error is not None:
            raise self._error
        self.sent.extend(messages)


def reason_of(raw: bytes) -> str:
    with pytest.raises(Rejected) as caught:
        json_object(raw, MAX)
    return caught.value.reason


def test_json_object_refuses_what_is_no_object_for_the_reasons_of_the_intake() -> None:
    assert json_object(b'{"a": [1]}', MAX) == {"a": [1]}
    assert reason_of(b"") == reason_of(b"{") == reason_of(b'{"a": NaN}') == "malformed_json"
    assert reason_of(b"[1]") == reason_of(b'"text"') == "not_an_object"
    assert reason_of(b'{"a": "' + b"x" * MAX + b'"}') == "oversized"
    for raw in (b"", b"[1]", b"{", b"x" * (MAX + 1)):
        with pytest.raises(Rejected) as from_intake:
            parse_event(raw, MEMORY_EVENT_TYPES, MAX)
        assert from_intake.value.reason == reason_of(raw)


def test_each_event_goes_to_its_topic_keyed_as_the_topic_expects() -> None:
    def event(event_type: str, payload: dict[str, object]) -> tuple[str, bytes]:
        return destination(validated(event_type, "team-a", payload, producer="tests"))

    assert event("memory.write", {"text": "t"}) == (MEMORY_EVENTS, b"team-a")
    assert event("memory.deprecate", {"record_id": "mem_1", "reason": "r"}) == \
        (MEMORY_EVENTS, b"team-a")
    assert event("run.step", {"run_id": "run-7", "kind": "note"}) == (RUNS_EVENTS, b"run-7")
    assert event("memory.consolidate", {"reason": "manual"}) == (MEMORY_CONSOLIDATE, b"team-a")


def test_a_request_names_its_key_as_producer_and_keeps_a_given_event_id() -> None:
    document = envelope_of("memory.write", {"namespace": "team-a", "event_id": "e-1"},
                           {"text": "t"}, ANN)
    assert (document["event_id"], document["producer"], document["namespace"]) == \
        ("e-1", "http:k1", "team-a")
    assert envelope_of("memory.write", {}, {"text": "t"}, ANN)["event_id"]


def test_a_posted_run_event_takes_its_producer_from_the_key_and_starts_as_its_agent() -> None:
    body = {"type": "run.started", "namespace": "team-a", "producer": "someone",
            "payload": {"run_id": "r"}}
    document = run_fields(body, ANN)
    assert (document["producer"], document["payload"]) == ("http:k1",
                                                           {"run_id": "r", "agent": "ann"})
    assert run_fields(body, OPERATOR)["payload"] == {"run_id": "r"}
    with pytest.raises(Forbidden):
        run_fields({**body, "payload": {"run_id": "r", "agent": "bob"}}, ANN)
    given = "2026-11-01T10:00:00+00:00"
    assert run_fields({**body, "occurred_at": given}, ANN)["occurred_at"] == given


def write_document(text: str) -> dict[str, object]:
    return {"event_id": "e-1", "type": "memory.write", "namespace": "team-a",
            "occurred_at": datetime.now(UTC).isoformat(), "producer": "http:k1",
            "payload": {"text": text}}


async def test_the_gate_publishes_the_bytes_it_checked_to_the_events_topic() -> None:
    producer = RecordingProducer()
    gate = EventGate(producer, MAX)
    raw, parsed = gate.checked(write_document("Deploys need the VPN."),
                               {"memory.write": MemoryWrite})
    published = await gate.publish(raw, parsed.event)
    assert (published.event_id, published.topic) == ("e-1", MEMORY_EVENTS)
    assert producer.sent == [Outbound(MEMORY_EVENTS, b"team-a", raw)]
    assert json.loads(raw)["payload"] == {"text": "Deploys need the VPN."}


def test_the_gate_refuses_what_the_intake_refuses() -> None:
    gate = EventGate(RecordingProducer(), MAX)
    with pytest.raises(Rejected) as caught:
        gate.checked(write_document(""), {"memory.write": MemoryWrite})
    assert caught.value.reason == "invalid_event"
    with pytest.raises(Rejected) as caught:
        gate.checked({**write_document("t"), "type": "run.exploded"}, RUN_EVENT_TYPES)
    assert caught.value.reason == "unknown_type"


async def test_a_broker_away_or_silent_is_not_published_and_says_which_event() -> None:
    for producer in (RecordingProducer(KafkaConnectionError("connection refused")),
                     RecordingProducer(hang=True)):
        gate = EventGate(producer, MAX, timeout_s=0.05)
        raw, parsed = gate.checked(write_document("t"), {"memory.write": MemoryWrite})
        with pytest.raises(NotPublished) as caught:
            await gate.publish(raw, parsed.event)
        assert caught.value.event_id == "e-1" and "retry with the same event_id" in \
            str(caught.value)


async def test_a_failure_that_is_no_broker_away_is_not_taken_for_one() -> None:
    gate = EventGate(RecordingProducer(ValueError("a bug")), MAX)
    raw, parsed = gate.checked(write_document("t"), {"memory.write": MemoryWrite})
    with pytest.raises(ValueError):
        await gate.publish(raw, parsed.event)
