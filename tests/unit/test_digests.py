import json
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memstream_client.events import RUN_EVENT_TYPES, Provenance, RunEvent
from memstream_client.ids import digest_record_id
from processors.llm_prompts import accepted_prose, digest_rewrite_request
from processors.runs.digests import (
    DIGEST_TOKEN_CAP,
    IncompleteRun,
    build_digest,
    digest_record,
    error_headline,
)
from processors.text.condense import approx_tokens

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
PROVENANCE = Provenance(source_event_id="e009", source_topic="runs.events",
                        source_partition=0, source_offset=9, producer="tests")

PY_TRACE = """Traceback (most recent call last):
  File "/srv/app/login.py", line 12, in wait_for_login
    raise TimeoutError("login took 31s")
TimeoutError: login took 31s"""


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
        event(0, "run.started", intent="Fix the flaky login test", task_key="ISSUE-7",
              repo="acme/web"),
        event(1, "run.step", kind="tool_call", tool="pytest", text="ran the suite"),
        event(2, "run.step", kind="error", error=PY_TRACE),
        event(3, "run.step", kind="decision", text="Mock the clock instead of sleeping."),
        event(4, "run.step", kind="retry", attempt=2, text="re-ran the login tests"),
        event(5, "run.artifact", kind="test_result", ref="artifacts/run-1/junit.xml",
              title="junit report"),
        event(6, "run.artifact", kind="patch", ref="artifacts/run-1/fix.diff",
              title="mock the clock"),
        event(7, "run.finished", status="succeeded", summary="Login test is stable now.",
              commits=["abc123"], pull_requests=["acme/web#42"],
              files_changed=["tests/test_login.py"],
              next_steps=["Apply the same fix to the signup test"]),
    ]


def test_every_part_of_the_digest_is_linked_to_its_evidence() -> None:
    digest = build_digest(run_events())
    assert digest.intent is not None
    assert (digest.intent.text, digest.intent.evidence) == ("Fix the flaky login test", ("e000",))
    assert digest.outcome.text == "succeeded — Login test is stable now."
    assert digest.outcome.evidence == ("e007", "commit:abc123", "pr:acme/web#42")
    assert [(i.text, i.evidence) for i in digest.decisions] == [
        ("Mock the clock instead of sleeping.", ("e003",))
    ]
    assert [(i.text, i.evidence) for i in digest.key_changes] == [
        ("commit abc123", ("e007", "commit:abc123")),
        ("pull request acme/web#42", ("e007", "pr:acme/web#42")),
        ("files: tests/test_login.py", ("e007",)),
        ("patch mock the clock", ("e006", "artifact:artifacts/run-1/fix.diff")),
    ]
    assert [i.text for i in digest.next_steps] == ["Apply the same fix to the signup test"]
    assert (digest.task_key, digest.repo) == ("ISSUE-7", "acme/web")
    assert digest.event_ids == tuple(f"e{n:03d}" for n in range(8))
    assert [a.ref for a in digest.artifacts] == [
        "artifacts/run-1/junit.xml", "artifacts/run-1/fix.diff"
    ]


def test_a_gotcha_says_which_error_was_met_and_how_it_was_overcome() -> None:
    (gotcha,) = build_digest(run_events()).gotchas
    assert gotcha.text == (
        "TimeoutError: login took 31s; overcome by: Mock the clock instead of sleeping."
    )
    assert gotcha.evidence == ("e002", "e003")


def test_a_retry_overcomes_an_error_and_says_which_attempt() -> None:
    events = [
        event(0, "run.started", intent="deploy"),
        event(1, "run.step", kind="error", error="ConnectionResetError: peer reset"),
        event(2, "run.step", kind="retry", attempt=2),
        event(3, "run.finished", status="succeeded"),
    ]
    (gotcha,) = build_digest(events).gotchas
    assert gotcha.text == "ConnectionResetError: peer reset; overcome by: retry 2"
    assert gotcha.evidence == ("e001", "e002")


def test_an_error_nothing_overcame_in_a_failed_run_is_unresolved() -> None:
    events = [
        event(0, "run.started", intent="deploy"),
        event(1, "run.step", kind="error", error="panic: nil map"),
        event(2, "run.step", kind="error", error="panic: nil map again"),
        event(3, "run.finished", status="failed", error="panic: nil map again"),
    ]
    digest = build_digest(events)
    assert [g.text for g in digest.gotchas] == [
        "panic: nil map; unresolved",
        "panic: nil map again; unresolved",
        "failed with: panic: nil map again",
    ]
    assert [s.text for s in digest.next_steps] == ["resolve: panic: nil map again"]


def test_the_digest_does_not_depend_on_delivery_order() -> None:
    events = run_events()
    shuffled = events[:]
    random.Random(7).shuffle(shuffled)
    assert build_digest(shuffled) == build_digest(events)


def test_a_run_without_its_end_has_no_digest() -> None:
    with pytest.raises(IncompleteRun):
        build_digest(run_events()[:-1])


def test_the_headline_of_a_python_traceback_is_its_last_line() -> None:
    assert error_headline(PY_TRACE) == "TimeoutError: login took 31s"
    assert error_headline("java.lang.IllegalStateException: closed\n\tat a.B.c(B.java:1)") == (
        "java.lang.IllegalStateException: closed"
    )
    assert error_headline("  \n") == ""


def test_long_text_is_condensed_at_sentence_boundaries() -> None:
    long_intent = "Make the importer resilient. " * 40
    digest = build_digest([event(0, "run.started", intent=long_intent),
                           event(1, "run.finished", status="succeeded")])
    assert digest.intent is not None
    assert len(digest.intent.text) <= 240
    assert digest.intent.text.endswith("…")
    assert digest.intent.text.startswith("Make the importer resilient.")


def test_a_long_run_is_rendered_within_the_token_cap_with_its_evidence() -> None:
    steps = [
        event(n, "run.step", kind="decision", text=f"Decision {n}: " + "why it matters. " * 12)
        for n in range(1, 40)
    ]
    commits = [f"c{n:05d}" for n in range(30)]
    events = [event(0, "run.started", intent="Refactor everything"), *steps,
              event(50, "run.finished", status="succeeded", commits=commits)]
    text = build_digest(events).render()
    assert approx_tokens(text) <= DIGEST_TOKEN_CAP
    assert "Decisions:\n- Decision 1:" in text
    assert text.splitlines()[-1].startswith("Evidence: run run-1; commits c00000")


def test_secrets_in_run_text_never_reach_the_digest() -> None:
    events = [
        event(0, "run.started", intent="rotate keys"),
        event(1, "run.step", kind="error",
              error="AuthError: bad token password=hunter2hunter2 for db"),
        event(2, "run.finished", status="failed"),
    ]
    text = build_digest(events).render()
    assert "hunter2" not in text
    assert "[REDACTED:assigned_secret]" in text


def test_the_record_is_derived_from_namespace_and_run_and_stores_as_json() -> None:
    digest = build_digest(run_events())
    record = digest_record(digest, PROVENANCE)
    assert record.record_id == digest_record_id("team-a", "run-1")
    assert record.record_kind == "run_digest"
    assert record.run_ref == "run-1"
    assert record.title == "Run run-1 succeeded (ISSUE-7)"
    assert record.created_at == T0 + timedelta(seconds=7)
    assert record.text == digest.render()
    assert record.body["text_source"] == "deterministic"
    assert record.body["key_changes"][0] == {"text": "commit abc123",
                                             "evidence": ["e007", "commit:abc123"]}
    json.dumps(record.body)  # jsonb takes it as it is


def test_rewritten_prose_keeps_the_deterministic_evidence_line() -> None:
    digest = build_digest(run_events())
    record = digest_record(digest, PROVENANCE, rewritten="The login test was fixed.")
    assert record.text == f"The login test was fixed.\n{digest.evidence_line()}"
    assert record.body["text_source"] == "llm"


def test_the_llm_is_asked_for_the_summary_and_unusable_answers_are_refused() -> None:
    digest = build_digest(run_events())
    system, user = digest_rewrite_request(digest)
    assert system["role"] == "system"
    assert user == {"role": "user", "content": digest.summary_text()}
    assert accepted_prose("  Fixed the test.  ") == "Fixed the test."
    assert accepted_prose("   ") is None
    assert accepted_prose("word " * 4 * DIGEST_TOKEN_CAP) is None
    assert accepted_prose("use api_key=abcd1234efgh") == "use api_key=[REDACTED:assigned_secret]"
