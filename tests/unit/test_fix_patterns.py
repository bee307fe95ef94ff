import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memstream_client.events import RUN_EVENT_TYPES, Provenance, RunEvent
from memstream_client.ids import digest_record_id, fix_pattern_record_id
from processors.runs.fix_patterns import (
    ErrorOccurrence,
    Origin,
    RunFacts,
    build_fix_pattern,
    error_occurrences,
    error_signature,
    fix_pattern_record,
    run_errors,
)
from processors.runs.signatures import ErrorSignature

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
SIGNATURE = ErrorSignature(
    signature_id="sig_0123456789abcdef0123", dialect="python", exception_type="KeyError",
    template="KeyError: <*>", frames=("app/cache.py:load",),
)


def provenance(event_id: str) -> Provenance:
    return Provenance(source_event_id=event_id, source_topic="runs.events",
                      source_partition=0, source_offset=0, producer="tests")


def occurrence(event_id: str, run_id: str, minute: int, origin: Origin = "step") -> ErrorOccurrence:
    return ErrorOccurrence(
        event_id=event_id, namespace="team-a", run_id=run_id, origin=origin,
        occurred_at=T0 + timedelta(minutes=minute), signature=SIGNATURE,
        message=f"KeyError: 'user-{minute}'", provenance=provenance(event_id),
    )


def run(run_id: str, status: str | None, minute: int | None, task_key: str | None = "T-1",
        repo: str | None = "acme/web", **digest: Any) -> RunFacts:
    finished = None if minute is None else T0 + timedelta(minutes=minute)
    return RunFacts(run_id=run_id, task_key=task_key, repo=repo, status=status,
                    finished_at=finished, **digest)


def event(type_: str, **payload: Any) -> RunEvent:
    return RUN_EVENT_TYPES[type_].model_validate({
        "event_id": "e1", "type": type_, "namespace": "team-a", "occurred_at": T0,
        "producer": "tests", "payload": {"run_id": "run-1", **payload},
    })


def test_error_steps_and_failed_runs_are_occurrences_nothing_else_is() -> None:
    (step,) = error_occurrences(event("run.step", kind="error", error="KeyError: 'u-1'"),
                                provenance("e1"))
    assert (step.origin, step.run_id, step.message) == ("step", "run-1", "KeyError: 'u-1'")
    (end,) = error_occurrences(
        event("run.finished", status="failed", error="KeyError: 'u-2'"), provenance("e1"))
    assert end.origin == "finished"
    assert end.signature == step.signature
    assert error_occurrences(event("run.finished", status="succeeded"), provenance("e1")) == []
    assert error_occurrences(event("run.finished", status="failed"), provenance("e1")) == []
    assert error_occurrences(event("run.step", kind="note", text="KeyError"),
                             provenance("e1")) == []


def test_an_occurrence_example_is_redacted() -> None:
    (found,) = error_occurrences(
        event("run.step", kind="error", error="AuthError: api_key=abcdef123456 refused"),
        provenance("e1"),
    )
    assert "abcdef123456" not in found.message


def test_an_error_with_a_secret_is_looked_up_under_the_signature_it_was_stored_under() -> None:
    text = "AuthError: login failed with password=hunter2hunter2 for db"
    (stored,) = error_occurrences(event("run.step", kind="error", error=text), provenance("e1"))
    assert error_signature(text) == stored.signature
    assert "hunter2" not in stored.signature.template


def test_the_next_succeeding_run_of_the_same_task_is_the_fix() -> None:
    occurrences = [occurrence("a", "r1", 0), occurrence("b", "r2", 10)]
    runs = {"r1": run("r1", "failed", 1), "r2": run("r2", "failed", 11)}
    succeeded = [
        run("r0", "succeeded", -5),  # before the error: not a fix
        run("r3", "succeeded", 20, commits=("abc123",), files_changed=("app/cache.py",),
            key_changes=("commit abc123", "files: app/cache.py")),
        run("r4", "succeeded", 30),  # a later success: r3 was first
        run("r5", "succeeded", 15, task_key="T-2"),  # another task
    ]
    pattern = build_fix_pattern(occurrences, runs, succeeded)
    assert (pattern.count, pattern.runs) == (2, ("r1", "r2"))
    assert (pattern.first_seen, pattern.last_seen) == (T0, T0 + timedelta(minutes=10))
    (fix,) = pattern.fixes
    assert (fix.run_id, fix.after_runs, fix.commits) == ("r3", ("r1", "r2"), ("abc123",))
    assert fix.digest_record_id == digest_record_id("team-a", "r3")
    assert pattern.success_count == 1
    assert pattern.example == "KeyError: 'user-0'"


def test_without_a_task_key_a_success_in_the_same_repo_within_the_window_fixes() -> None:
    occurrences = [occurrence("a", "r1", 0)]
    runs = {"r1": run("r1", "failed", 1, task_key=None)}
    late = [run("r2", "succeeded", 60 * 30, task_key=None)]
    assert build_fix_pattern(occurrences, runs, late).fixes == ()
    other_repo = [run("r2", "succeeded", 30, task_key=None, repo="acme/api")]
    assert build_fix_pattern(occurrences, runs, other_repo).fixes == ()
    in_window = [run("r2", "succeeded", 30, task_key="T-9")]
    (fix,) = build_fix_pattern(occurrences, runs, in_window).fixes
    assert fix.run_id == "r2"
    (wide,) = build_fix_pattern(occurrences, runs, late, window=timedelta(days=2)).fixes
    assert wide.run_id == "r2"


def test_a_run_that_met_the_error_and_succeeded_fixed_it_itself() -> None:
    pattern = build_fix_pattern([occurrence("a", "r1", 0)],
                                {"r1": run("r1", "succeeded", 5)}, [])
    (fix,) = pattern.fixes
    assert (fix.run_id, fix.after_runs) == ("r1", ("r1",))
    assert "recovered within the run" in pattern.playbook()


def test_a_failed_end_restating_its_step_error_is_counted_once() -> None:
    occurrences = [occurrence("a", "r1", 0), occurrence("b", "r1", 1, origin="finished"),
                   occurrence("c", "r2", 5, origin="finished")]
    runs = {"r1": run("r1", "failed", 1), "r2": run("r2", "failed", 5)}
    assert build_fix_pattern(occurrences, runs, []).count == 2


def test_a_run_lists_each_error_it_met_once_in_the_order_it_first_met_them() -> None:
    other = replace(SIGNATURE, signature_id="sig_ffffffffffffffffffff", exception_type="OSError")
    occurrences = [
        occurrence("c", "r1", 7, origin="finished"),
        replace(occurrence("b", "r1", 3), signature=other, message="OSError: disk full"),
        occurrence("a", "r1", 1),
        occurrence("d", "r1", 5),
    ]
    errors = run_errors(occurrences)
    assert [(e.signature.signature_id, e.count, e.first_seen, e.example) for e in errors] == [
        (SIGNATURE.signature_id, 2, T0 + timedelta(minutes=1), "KeyError: 'user-1'"),
        (other.signature_id, 1, T0 + timedelta(minutes=3), "OSError: disk full")]


def test_a_failed_end_with_an_error_no_step_reported_is_counted() -> None:
    other = replace(SIGNATURE, signature_id="sig_ffffffffffffffffffff")
    occurrences = [occurrence("a", "r1", 0),
                   replace(occurrence("b", "r1", 1, origin="finished"), signature=other)]
    assert [(e.signature.signature_id, e.count) for e in run_errors(occurrences)] == [
        (SIGNATURE.signature_id, 1), (other.signature_id, 1)]


def test_the_pattern_does_not_depend_on_arrival_order() -> None:
    occurrences = [occurrence(f"o{n}", f"r{n % 4}", n) for n in range(12)]
    runs = {f"r{n}": run(f"r{n}", "failed", 12 + n, task_key=f"T-{n % 2}") for n in range(4)}
    succeeded = [run(f"s{n}", "succeeded", 20 + n, task_key=f"T-{n % 2}") for n in range(6)]
    expected = fix_pattern_record(build_fix_pattern(occurrences, runs, succeeded))
    for seed in range(5):
        rng = random.Random(seed)
        shuffled_occurrences = rng.sample(occurrences, len(occurrences))
        shuffled_succeeded = rng.sample(succeeded, len(succeeded))
        again = build_fix_pattern(shuffled_occurrences, runs, shuffled_succeeded)
        assert fix_pattern_record(again) == expected


def test_the_record_carries_template_occurrences_fixes_and_a_playbook() -> None:
    occurrences = [occurrence("a", "r1", 0), occurrence("b", "r2", 10)]
    runs = {"r1": run("r1", "failed", 1), "r2": run("r2", "failed", 11)}
    succeeded = [run("r3", "succeeded", 20, key_changes=("commit abc123",))]
    record = fix_pattern_record(build_fix_pattern(occurrences, runs, succeeded))
    assert record.record_id == fix_pattern_record_id("team-a", SIGNATURE.signature_id)
    assert record.record_kind == "fix_pattern"
    assert record.title == "KeyError: KeyError: <*>"
    assert record.body["template"] == "KeyError: <*>"
    assert record.body["occurrences"]["count"] == 2
    assert record.body["occurrences"]["runs"] == ["r1", "r2"]
    assert record.body["fixes"][0]["run_id"] == "r3"
    assert record.body["success_count"] == 1
    assert record.related_ids[0] == digest_record_id("team-a", "r3")
    assert record.provenance.source_event_id == "b"
    assert record.created_at == T0
    assert "What worked (1 successful runs):" in record.text
    assert "- run r3 (after r1, r2): commit abc123" in record.text


def test_a_pattern_without_a_fix_says_so() -> None:
    pattern = build_fix_pattern([occurrence("a", "r1", 0)], {"r1": run("r1", "failed", 1)}, [])
    assert pattern.fixes == ()
    assert "No fix recorded yet" in pattern.playbook()


def test_a_pattern_needs_an_occurrence() -> None:
    with pytest.raises(ValueError):
        build_fix_pattern([], {}, [])
