"""The rules of a session's events and the memory writes each asks for
(processors/memory/sessions.py), and a step and a ledger as answered
(streams/api/memory/sessions.py). The stage on the real stack:
tests/integration/test_sessions.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from memstream_client.answers.writes import WriteOutcome
from memstream_client.events import (
    SESSION_EVENT_TYPES,
    SessionCheckpointed,
    SessionEvent,
    SessionSlept,
)
from memstream_client.ids import memory_record_id
from processors.events.errors import Rejected
from processors.memory.sessions import (
    admitted,
    checkpoint_record_ids,
    handoff_record_id,
    handoff_text,
    handoff_title,
    memory_writes,
)
from stores.sessions import SessionEntry
from streams.api.memory.sessions import ledger_view, step_answer

NOW = datetime(2026, 11, 24, 10, 0, tzinfo=UTC)


def event(event_type: str, event_id: str, session: str = "s1", agent: str = "a1",
          **payload: Any) -> SessionEvent:
    return SESSION_EVENT_TYPES[event_type].model_validate({
        "event_id": event_id, "type": event_type, "namespace": "team-a", "occurred_at": NOW,
        "producer": "test", "payload": {"session_id": session, "agent_id": agent, **payload}})


WOKE = event("session.woke", "e1", task="fix the flaky login test")
CHECKPOINT = event("session.checkpointed", "e2",
                   memories=[{"text": "The login test waits on a real clock."},
                             {"text": "CI runs on UTC.", "scope": "shared", "tags": ["ci"]}])
SLEPT = event("session.slept", "e3", summary="Froze the clock in the login test.",
              next_steps=["Remove the retry decorator", "Watch CI for a week"])


def test_a_session_wakes_checkpoints_and_sleeps_in_that_order() -> None:
    state = admitted(None, WOKE)
    assert (state.agent_id, state.task, state.slept_by) == ("a1", WOKE.payload.task, None)
    state = admitted(admitted(state, CHECKPOINT), SLEPT)
    assert state.slept_by == "e3"
    assert state.event_ids == {"e1", "e2", "e3"}


@pytest.mark.parametrize(("before", "step", "reason", "says"), [
    ([], CHECKPOINT, "broken_reference", "never woke"),
    ([], SLEPT, "broken_reference", "never woke"),
    ([WOKE], event("session.woke", "e9"), "invalid_transition", "woke already"),
    ([WOKE, SLEPT], event("session.checkpointed", "e9", memories=[{"text": "late"}]),
     "invalid_transition", "has ended"),
    ([WOKE, SLEPT], event("session.slept", "e9", summary="again"), "invalid_transition",
     "has ended"),
    ([WOKE], event("session.slept", "e9", agent="a2", summary="not mine"),
     "invalid_transition", "agent 'a1'"),
])
def test_an_event_that_breaks_the_sessions_rules_is_refused_with_its_reason(
        before: list[SessionEvent], step: SessionEvent, reason: str, says: str) -> None:
    state = None
    for earlier in before:
        state = admitted(state, earlier)
    with pytest.raises(Rejected) as refused:
        admitted(state, step)
    assert refused.value.reason == reason
    assert says in refused.value.detail


def test_an_event_replayed_changes_nothing_even_after_the_session_ended() -> None:
    state = admitted(admitted(admitted(None, WOKE), CHECKPOINT), SLEPT)
    for replayed in (WOKE, CHECKPOINT, SLEPT):
        assert admitted(state, replayed) == state


def test_a_checkpoint_writes_its_memories_in_the_sessions_thread_as_its_agent() -> None:
    writes = memory_writes(CHECKPOINT, "fix the flaky login test")
    assert [w.payload.text for w in writes] == [m.text for m in CHECKPOINT.payload.memories]
    personal, shared = (w.payload for w in writes)
    assert (personal.scope, personal.agent_id) == ("personal", "a1")
    assert (shared.scope, shared.agent_id, shared.tags) == ("shared", None, ["ci"])
    assert {w.payload.thread for w in writes} == {"s1"}
    assert {w.payload.source_ref for w in writes} == {"session:s1"}
    assert [memory_record_id("team-a", w.event_id) for w in writes] == \
        checkpoint_record_ids("team-a", CHECKPOINT)


def test_a_sleep_writes_one_handoff_built_from_what_the_agent_passed() -> None:
    (write,) = memory_writes(SLEPT, "fix the flaky login test")
    assert write.payload.text == ("Summary: Froze the clock in the login test.\n\n"
                                  "Next steps:\n- Remove the retry decorator\n"
                                  "- Watch CI for a week")
    assert write.payload.title == "Handoff: fix the flaky login test"
    assert (write.payload.memory_type, write.payload.scope, write.payload.agent_id) == \
        ("handoff", "personal", "a1")
    assert memory_record_id("team-a", write.event_id) == handoff_record_id("team-a", "e3")


def test_the_writes_are_named_by_the_session_event_so_a_replay_writes_the_same() -> None:
    assert memory_writes(SLEPT, "t") == memory_writes(SLEPT, "t")
    other = event("session.slept", "e4", summary=SLEPT.payload.summary)
    assert memory_writes(other, "t")[0].event_id != memory_writes(SLEPT, "t")[0].event_id
    assert memory_writes(WOKE, "t") == []


def test_a_handoff_without_next_steps_is_its_summary_and_a_long_task_a_short_title() -> None:
    assert handoff_text(" Done. ", []) == "Summary: Done."
    assert handoff_title("") == "Handoff"
    assert len(handoff_title("x" * 500)) == 200


def test_a_handoff_longer_than_a_memory_is_refused() -> None:
    long = event("session.slept", "e5", summary="s" * 8000, next_steps=["one more step"])
    with pytest.raises(Rejected) as refused:
        memory_writes(long, "t")
    assert refused.value.reason == "invalid_event"


def test_the_llm_hooks_text_replaces_the_handoffs_and_nothing_else() -> None:
    (deterministic,) = memory_writes(SLEPT, "t")
    (rewritten,) = memory_writes(SLEPT, "t", "Froze the clock; next: drop the retry.")
    assert rewritten.payload.text == "Froze the clock; next: drop the retry."
    assert rewritten.model_copy(update={"payload": deterministic.payload}) == deterministic


def entry(step: SessionEvent) -> SessionEntry:
    return SessionEntry(step.event_id, step.type, step.namespace, step.payload.session_id,
                        step.payload.agent_id, step.occurred_at, step.producer,
                        step.payload.model_dump(mode="json", exclude_defaults=True))


def test_a_steps_answer_names_the_records_that_hold_its_decided_memories_and_no_other() -> None:
    assert isinstance(CHECKPOINT, SessionCheckpointed) and isinstance(SLEPT, SessionSlept)
    first, second = checkpoint_record_ids("team-a", CHECKPOINT)
    stored = outcome("c0", "stored", first)
    refused = outcome("c1", "refused", None)
    answer = json.loads(step_answer("s1", "e2", CHECKPOINT, [stored, refused]).rendered())
    # The refused memory has no record: its outcome says why, and no id stands for it.
    assert answer["record_ids"] == [first] and second not in json.dumps(answer)
    assert [write["outcome"] for write in answer["writes"]] == ["stored", "refused"]
    pending = step_answer("s1", "e3", SLEPT, [outcome("h", "pending", None)])
    assert not pending.decided
    assert json.loads(pending.rendered()) == {
        "session_id": "s1", "event_id": "e3", "handoff_record_id": None, "writes": [
            json.loads(outcome("h", "pending", None).rendered())]}
    restated = step_answer("s1", "e3", SLEPT, [outcome("h", "restated", "mem_twin")])
    assert (restated.decided, restated.handoff_record_id) == (True, "mem_twin")


def outcome(event_id: str, kind: str, record_id: str | None) -> WriteOutcome:
    decided = {} if kind == "pending" else {"decided_at": NOW}
    return WriteOutcome(namespace="team-a", event_id=event_id, outcome=kind,
                        outcome_url=f"/v1/writes/{event_id}?namespace=team-a",
                        record_id=record_id, **decided)


def test_a_ledger_answers_its_state_and_moments_as_written() -> None:
    awake = json.loads(ledger_view("team-a", "s1", [entry(WOKE)], None).rendered())
    assert (awake["state"], awake["woke_at"], awake["slept_at"]) == (
        "awake", NOW.isoformat(), None)
    asleep = json.loads(ledger_view("team-a", "s1", [entry(e) for e in (WOKE, CHECKPOINT,
                                                                        SLEPT)],
                                    handoff_record_id("team-a", "e3")).rendered())
    assert (asleep["state"], asleep["task"], asleep["handoff_record_id"]) == (
        "asleep", "fix the flaky login test", handoff_record_id("team-a", "e3"))
    assert [e["type"] for e in asleep["events"]] == [
        "session.woke", "session.checkpointed", "session.slept"]
    assert asleep["events"][2]["payload"]["next_steps"] == [
        "Remove the retry decorator", "Watch CI for a week"]
