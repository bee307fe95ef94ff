import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from processors.digests import IncompleteRun, build_digest, digest_record
from processors.ids import digest_record_id
from schemas.events import RUN_EVENT_TYPES, Provenance, RunEvent, RunFinished

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def event(n: int, type_: str, **payload: Any) -> RunEvent:
    return RUN_EVENT_TYPES[type_].model_validate(
        {
            "event_id": f"e{n:03d}",
            "type": type_,
            "namespace": "team-a",
            "occurred_at": T0 + timedelta(seconds=n),
            "producer": "tests",
            "payload": {"run_id": "run-1", **payload},
        }
    )


def run_events() -> list[RunEvent]:
    return [
        event(0, "run.started", intent="Fix the flaky login test", task_key="ISSUE-7"),
        event(1, "run.step", kind="tool_call", tool="pytest", text="ran the suite"),
        event(2, "run.step", kind="status_change", status="tests failing",
              text="login test times out after 30s"),
        event(3, "run.step", kind="decision", text="Mock the clock instead of sleeping."),
        event(4, "run.finished", status="succeeded", summary="Login test is stable now.",
              commits=["abc123"], files_changed=["tests/test_login.py"],
              next_steps=["Apply the same fix to the signup test"]),
    ]


def test_the_digest_holds_every_part_of_the_run() -> None:
    digest = build_digest(run_events())
    assert digest.intent == "Fix the flaky login test"
    assert digest.outcome.startswith("succeeded")
    assert digest.decisions == ("Mock the clock instead of sleeping.",)
    assert digest.gotchas == ("tests failing: login test times out after 30s",)
    assert digest.key_changes == ("commit abc123", "files: tests/test_login.py")
    assert digest.next_steps == ("Apply the same fix to the signup test",)
    assert digest.task_key == "ISSUE-7"
    assert digest.event_ids == ("e000", "e001", "e002", "e003", "e004")
    text = digest.render()
    assert "Decisions:\n- Mock the clock" in text
    assert "Outcome: succeeded" in text


def test_the_digest_does_not_depend_on_delivery_order() -> None:
    events = run_events()
    shuffled = events[:]
    random.Random(7).shuffle(shuffled)
    assert build_digest(shuffled) == build_digest(events)


def test_a_run_without_its_end_has_no_digest() -> None:
    with pytest.raises(IncompleteRun):
        build_digest(run_events()[:-1])


def test_a_failed_run_records_its_error_as_a_gotcha() -> None:
    events = [*run_events()[:2], event(9, "run.finished", status="failed",
                                         error="TimeoutError: login took 31s")]
    digest = build_digest(events)
    assert digest.outcome == "failed"
    assert digest.gotchas == ("failed with: TimeoutError: login took 31s",)


def test_long_text_is_condensed_at_sentence_boundaries() -> None:
    long_intent = "Make the importer resilient. " * 40
    digest = build_digest([event(0, "run.started", intent=long_intent),
                           event(1, "run.finished", status="succeeded")])
    assert len(digest.intent) <= 240
    assert digest.intent.endswith("…")
    assert digest.intent.startswith("Make the importer resilient.")


def test_the_record_id_is_derived_from_namespace_and_run() -> None:
    events = run_events()
    end = events[-1]
    assert isinstance(end, RunFinished)
    provenance = Provenance(source_event_id="e004", source_topic="runs.events",
                            source_partition=0, source_offset=4, producer="tests")
    record = digest_record(build_digest(events), provenance, end)
    assert record.record_id == digest_record_id("team-a", "run-1")
    assert record.record_kind == "run_digest"
    assert record.run_ref == "run-1"
    assert record.created_at == end.occurred_at
