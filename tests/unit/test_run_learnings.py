from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from memstream_client.events import MemoryUpdate, MemoryWrite, Provenance
from memstream_client.ids import digest_record_id, fix_pattern_record_id, memory_record_id
from processors.runs.fix_patterns import Fix, FixPattern
from processors.runs.learnings import (
    LEARNING_PRODUCER,
    LearningThresholds,
    RunStatements,
    StoredLearning,
    learning_event,
    normalized_statement,
    proposed_lesson,
    proposed_patterns,
    run_statements,
)
from processors.runs.signatures import ErrorSignature

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
SIGNATURE = ErrorSignature(
    signature_id="sig_0123456789abcdef0123", dialect="python", exception_type="TimeoutError",
    template="connection to <*> timed out after <*>", frames=(),
)
THRESHOLDS = LearningThresholds()


def fix(run_id: str, hour: int) -> Fix:
    return Fix(run_id=run_id, digest_record_id=digest_record_id("team-a", run_id),
               task_key="AUTH-7", repo="webapp", finished_at=T0 + timedelta(hours=hour),
               after_runs=(f"{run_id}-failed",), commits=(f"c{hour}",), pull_requests=(),
               files_changed=("app/db.py",), key_changes=("raise the pool timeout",))


def pattern(*fixes: Fix) -> FixPattern:
    return FixPattern(
        namespace="team-a", signature=SIGNATURE, example="TimeoutError: connection to db-7",
        count=len(fixes) + 1, first_seen=T0, last_seen=T0 + timedelta(hours=len(fixes)),
        runs=tuple(f"{f.run_id}-failed" for f in fixes),
        provenance=Provenance(source_event_id="e", source_topic="runs.events",
                              source_partition=0, source_offset=0, producer="tests"),
        fixes=tuple(reversed(fixes)), success_count=len(fixes),
    )


def test_a_lesson_needs_the_threshold_of_distinct_fixing_runs() -> None:
    assert proposed_lesson(pattern(fix("r1", 1), fix("r2", 2)), THRESHOLDS) is None
    assert proposed_lesson(pattern(fix("r1", 1), fix("r2", 2), fix("r3", 3)),
                           THRESHOLDS) is not None
    assert proposed_lesson(pattern(fix("r1", 1)), LearningThresholds(lesson_min_fixes=1))
    with pytest.raises(ValueError):
        LearningThresholds(lesson_min_fixes=0)
    with pytest.raises(ValueError):
        LearningThresholds(pattern_min_runs=1)


def test_a_lesson_says_the_error_what_fixed_it_and_in_which_runs() -> None:
    lesson = proposed_lesson(pattern(fix("r1", 1), fix("r2", 2), fix("r3", 3)), THRESHOLDS)
    assert lesson is not None
    assert lesson.text.splitlines()[0] == (
        "Lesson: when TimeoutError occurs (connection to <*> timed out after "
        "<*>), 3 runs fixed it.")
    assert "- run r2: raise the pool timeout" in lesson.text
    assert "Fixed in 3 runs: r1, r2, r3." in lesson.text
    assert lesson.title.startswith("Lesson: TimeoutError: connection to")
    assert (lesson.memory_type, lesson.runs) == ("lesson", ("r1", "r2", "r3"))
    fix_id = fix_pattern_record_id("team-a", SIGNATURE.signature_id)
    assert lesson.source_ref == f"fix_pattern:{fix_id}"
    assert lesson.related_ids == (fix_id, *(digest_record_id("team-a", r)
                                            for r in ("r3", "r2", "r1")))
    assert "run-learning" in lesson.tags


def test_a_lesson_keeps_its_id_and_grows_its_text_with_evidence() -> None:
    three = proposed_lesson(pattern(fix("r1", 1), fix("r2", 2), fix("r3", 3)), THRESHOLDS)
    four = proposed_lesson(pattern(fix("r1", 1), fix("r2", 2), fix("r3", 3), fix("r4", 4)),
                           THRESHOLDS)
    assert three is not None and four is not None
    assert (four.event_id, four.record_id) == (three.event_id, three.record_id)
    assert four.record_id == memory_record_id("team-a", three.event_id)
    assert "Fixed in 4 runs: r1, r2, r3, r4." in four.text and four.text != three.text
    # Deterministic: the same facts, whatever the order of the fixes, give the same lesson.
    shuffled = replace(pattern(fix("r1", 1), fix("r2", 2), fix("r3", 3), fix("r4", 4)),
                       fixes=(fix("r2", 2), fix("r4", 4), fix("r1", 1), fix("r3", 3)))
    assert proposed_lesson(shuffled, THRESHOLDS) == four


def test_a_lesson_names_how_many_runs_beyond_those_listed() -> None:
    many = replace(pattern(*(fix(f"r{i}", i) for i in range(1, 11))), success_count=25)
    lesson = proposed_lesson(many, THRESHOLDS)
    assert lesson is not None
    assert "Fixed in 25 runs: r1, r2, r3, r4, r5, r6, r7, r8, r9, r10 and 15 more." \
        in lesson.text


def statements(run_id: str, hour: int, decisions: tuple[str, ...] = (),
               gotchas: tuple[str, ...] = (), task_key: str = "AUTH-7") -> RunStatements:
    return RunStatements(run_id, task_key, T0 + timedelta(hours=hour), decisions, gotchas)


def test_statements_are_the_same_whatever_case_spacing_numbers_and_resolution() -> None:
    assert normalized_statement("decision", "Raise the pool  timeout to 60 s.") == \
        normalized_statement("decision", "raise the pool timeout to 90 s")
    assert normalized_statement("decision", "Use the staging database") != \
        normalized_statement("decision", "Use the production database")
    assert normalized_statement(
        "gotcha", "TimeoutError: connection to db-7.internal:5432 timed out; unresolved") == \
        normalized_statement(
            "gotcha", "TimeoutError: connection to db-3.internal:5432 timed out; overcome by: "
            "retry 2") == \
        normalized_statement("gotcha", "failed with: TimeoutError: connection to "
                                       "db-1.internal:5432 timed out")


def test_a_decision_recurring_in_runs_of_one_task_proposes_a_pattern() -> None:
    runs = [statements("r1", 1, decisions=("Pin the driver to 3.1.",)),
            statements("r2", 2, decisions=("pin the driver to 3.2",)),
            statements("r3", 3, decisions=("Something else",))]
    (only,) = proposed_patterns("team-a", runs, THRESHOLDS)
    assert only.text == ("Pattern in task AUTH-7: runs repeatedly decided: Pin the driver to "
                         "3.1.\nRecurred in 2 runs: r1, r2.")
    assert (only.memory_type, only.runs, only.source_ref) == ("pattern", ("r1", "r2"),
                                                             "task:AUTH-7")
    assert only.related_ids == (digest_record_id("team-a", "r2"),
                                digest_record_id("team-a", "r1"))
    grown = proposed_patterns("team-a", [*runs, statements("r4", 4, decisions=(
        "PIN the driver to 4.0",))], THRESHOLDS)
    assert [p.record_id for p in grown] == [only.record_id]
    assert grown[0].text.endswith("Recurred in 3 runs: r1, r2, r4.")
    # The order the digests were read in changes nothing.
    assert proposed_patterns("team-a", list(reversed(runs)), THRESHOLDS) == [only]


def test_patterns_count_runs_not_mentions_and_keep_tasks_and_kinds_apart() -> None:
    twice_in_one = [statements("r1", 1, gotchas=("KeyError: 'a'; unresolved",
                                                 "failed with: KeyError: 'b'"))]
    assert proposed_patterns("team-a", twice_in_one, THRESHOLDS) == []
    other_task = [statements("r1", 1, decisions=("Pin the driver",)),
                  statements("r2", 2, decisions=("Pin the driver",), task_key="AUTH-8")]
    assert proposed_patterns("team-a", other_task, THRESHOLDS) == []
    kinds = [statements("r1", 1, decisions=("Pin the driver",)),
             statements("r2", 2, gotchas=("Pin the driver; unresolved",))]
    assert proposed_patterns("team-a", kinds, THRESHOLDS) == []
    gotchas = [statements("r1", 1, gotchas=("KeyError: 'a'; unresolved",)),
               statements("r2", 2, gotchas=("KeyError: 'b'; overcome by: retry 2",))]
    (pattern_,) = proposed_patterns("team-a", gotchas, THRESHOLDS)
    assert pattern_.text.startswith("Pattern in task AUTH-7: runs repeatedly ran into: "
                                    "KeyError: 'a'\n")
    assert proposed_patterns("team-a", gotchas, LearningThresholds(pattern_min_runs=3)) == []


def test_run_statements_read_a_digest_body() -> None:
    body = {"run_id": "r1", "task_key": "AUTH-7", "finished_at": T0.isoformat(),
            "decisions": [{"text": "Pin the driver", "evidence": ["e1"]}],
            "gotchas": [{"text": "KeyError: 'a'; unresolved", "evidence": ["e2"]}]}
    assert run_statements(body) == statements("r1", 0, ("Pin the driver",),
                                              ("KeyError: 'a'; unresolved",))
    assert run_statements({**body, "task_key": None}) is None


def test_the_event_is_a_draft_write_then_an_update_then_nothing() -> None:
    three = proposed_lesson(pattern(fix("r1", 1), fix("r2", 2), fix("r3", 3)), THRESHOLDS)
    four = proposed_lesson(pattern(fix("r1", 1), fix("r2", 2), fix("r3", 3), fix("r4", 4)),
                           THRESHOLDS)
    assert three is not None and four is not None
    write = learning_event(three, None)
    assert isinstance(write, MemoryWrite)
    assert (write.event_id, write.producer, write.occurred_at) == (
        three.event_id, LEARNING_PRODUCER, T0 + timedelta(hours=3))
    payload = write.payload
    assert (payload.review_state, payload.trust_class, payload.memory_type) == (
        "draft", "derived", "lesson")
    assert payload.source_ref == three.source_ref
    stored = StoredLearning(version=1, review_state="draft", title=three.title,
                            text=three.text, related_ids=three.related_ids)
    assert learning_event(three, stored) is None
    update = learning_event(four, stored)
    assert isinstance(update, MemoryUpdate)
    assert (update.payload.record_id, update.payload.expected_version, update.payload.text) == (
        three.record_id, 1, four.text)
    # The same evidence names the same update, so a replay applies it once.
    again = learning_event(four, stored)
    assert again is not None and again.event_id == update.event_id
    assert learning_event(four, replace(stored, version=3)) is not None
    assert learning_event(four, replace(stored, review_state="deprecated")) is None
