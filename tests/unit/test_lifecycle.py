"""The lifecycle rules of a stored memory: update, deprecate, review, restore."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from memstream_client.events import LIFECYCLE_EVENT_TYPES, LifecycleEvent, Provenance
from processors.events.errors import Rejected
from processors.memory.lifecycle import (
    Current,
    Facts,
    PendingDiff,
    RecordVersion,
    invalidated,
    outcome_of,
    superseded_note,
    version_diff,
    version_fields,
)
from schemas.records import Record

NOW = datetime(2026, 11, 23, tzinfo=UTC)
RECORD = Record(
    record_id="mem_1", namespace="team-a", record_kind="memory",
    text="Deploys of billing need the VPN up.", title="Deploys", memory_type="lesson",
    tags=("ops",), body={"wiki_links": [], "redactions": {}},
    provenance=Provenance(source_event_id="w1", source_topic="memory.events",
                          source_partition=0, source_offset=1, producer="writer"),
    created_at=NOW,
)


def event(event_type: str, event_id: str = "e2", **payload: Any) -> LifecycleEvent:
    return LIFECYCLE_EVENT_TYPES[event_type].model_validate({
        "event_id": event_id, "type": event_type, "namespace": "team-a", "occurred_at": NOW,
        "producer": "agent-7", "payload": {"record_id": "mem_1", **payload},
    })


def facts(record: Record = RECORD, at: int = 1, **more: Any) -> Facts:
    """The record at version `at`; `more`: superseded_by and the other facts."""
    superseded_by = more.pop("superseded_by", None)
    return Facts(Current(record, at, superseded_by), **more)


def rejected(reason: str, evt: LifecycleEvent, given: Facts, **kwargs: Any) -> str:
    with pytest.raises(Rejected) as caught:
        outcome_of(evt, given, **kwargs)
    assert caught.value.reason == reason
    return caught.value.detail


def test_an_update_sets_the_fields_it_names_and_redacts_the_new_text() -> None:
    outcome = outcome_of(event("memory.update", expected_version=1,
                               text="Billing deploys need [[VPN]] and DB_PASSWORD=hunter2xyz",
                               tags=["ops", "billing", "ops"]), facts())
    assert outcome.change == "updated"
    assert outcome.changed == ("text", "tags")
    assert outcome.new_version and outcome.reembed
    assert "hunter2xyz" not in outcome.record.text
    assert outcome.record.body["wiki_links"] == ["VPN"]
    assert outcome.record.body["redactions"] == {"assigned_secret": 1}
    assert outcome.record.tags == ("ops", "billing")
    assert outcome.record.title == "Deploys"
    assert outcome.actor == "agent-7"


def test_an_update_that_changes_nothing_is_no_new_version() -> None:
    outcome = outcome_of(event("memory.update", expected_version=1, tags=["ops"]), facts())
    assert outcome.change == "unchanged"
    assert not outcome.new_version


def test_a_tag_change_keeps_the_vector() -> None:
    outcome = outcome_of(event("memory.update", expected_version=1, tags=["infra"]), facts())
    assert outcome.new_version and not outcome.reembed


def test_a_stale_update_is_refused_not_lost() -> None:
    detail = rejected("stale_version", event("memory.update", expected_version=1, text="x"),
                      facts(at=3))
    assert "version 3" in detail and "expected version 1" in detail


def test_an_update_without_a_field_is_invalid() -> None:
    with pytest.raises(ValueError, match="an update sets one of"):
        event("memory.update", expected_version=1)


@pytest.mark.parametrize("given, words", [
    (facts(RECORD.model_copy(update={"review_state": "deprecated"})), "deprecated"),
    (facts(superseded_by="mem_9"), "merged into mem_9"),
    (facts(RECORD.model_copy(update={"record_kind": "fix_pattern"})), "fix_pattern"),
])
def test_what_cannot_change_is_refused(given: Facts, words: str) -> None:
    assert words in rejected("invalid_transition",
                             event("memory.update", expected_version=1, text="x"), given)


def test_an_update_naming_an_unknown_record_is_a_broken_reference() -> None:
    evt = event("memory.update", expected_version=1, related_ids=["mem_2", "mem_3"])
    assert "mem_3" in rejected("broken_reference", evt, facts(known_ids={"mem_2"}))
    assert outcome_of(evt, facts(known_ids={"mem_2", "mem_3"})).changed == ("related_ids",)


def test_an_update_of_a_protected_record_is_a_proposal() -> None:
    evt = event("memory.update", expected_version=1, text="Billing deploys need no VPN.")
    outcome = outcome_of(evt, facts(), protect=("approved",))
    assert outcome.change == "proposed"
    assert outcome.record == RECORD and not outcome.new_version
    assert outcome.proposal == PendingDiff(
        diff_id="e2", namespace="team-a", record_id="mem_1", base_version=1,
        proposed={"text": "Billing deploys need no VPN."}, proposer="agent-7", proposed_at=NOW)


def test_a_draft_is_not_protected() -> None:
    draft = RECORD.model_copy(update={"review_state": "draft"})
    outcome = outcome_of(event("memory.update", expected_version=1, text="new"), facts(draft),
                         protect=("approved",))
    assert outcome.change == "updated"


def test_an_agents_active_personal_memory_is_its_working_memory() -> None:
    update = event("memory.update", expected_version=1, text="Deploys now go through CI.")
    working = RECORD.model_copy(update={"scope": "personal", "agent_id": "finn"})
    assert outcome_of(update, facts(working), protect=("approved",)).change == "updated"
    settled = working.model_copy(update={"tier": "short_term"})
    assert outcome_of(update, facts(settled), protect=("approved",)).change == "proposed"


def test_deprecation_keeps_the_reason_once() -> None:
    outcome = outcome_of(event("memory.deprecate", reason="billing moved off the VPN"),
                         facts())
    assert (outcome.change, outcome.record.review_state) == ("deprecated", "deprecated")
    assert outcome.reason == "billing moved off the VPN"
    again = outcome_of(event("memory.deprecate", reason="again"), facts(outcome.record, at=2))
    assert again.change == "unchanged"


def test_a_reviewer_approves_or_rejects_a_draft() -> None:
    draft = RECORD.model_copy(update={"review_state": "draft", "trust_class": "derived"})
    approved = outcome_of(event("memory.review", decision="approve", reviewer="ana"),
                          facts(draft))
    assert approved.change == "approved" and approved.actor == "ana"
    assert (approved.record.review_state, approved.record.trust_class) == ("approved",
                                                                           "approved")
    turned_down = outcome_of(event("memory.review", decision="reject", reviewer="ana"),
                             facts(draft))
    assert (turned_down.change, turned_down.record.review_state) == ("rejected", "deprecated")
    assert "not a draft" in rejected(
        "invalid_transition", event("memory.review", decision="approve", reviewer="ana"),
        facts())


DIFF = PendingDiff(diff_id="d1", namespace="team-a", record_id="mem_1", base_version=1,
                   proposed={"text": "Billing deploys need no VPN."}, proposer="agent-7",
                   proposed_at=NOW)


def test_an_approved_diff_is_applied_and_a_rejected_one_changes_nothing() -> None:
    approve = event("memory.review", decision="approve", reviewer="ana", diff_id="d1")
    applied = outcome_of(approve, facts(diff=DIFF), protect=("approved",))
    assert applied.change == "approved" and applied.decided == ("d1", "approved")
    assert applied.record.text == "Billing deploys need no VPN." and applied.new_version
    reject = event("memory.review", decision="reject", reviewer="ana", diff_id="d1")
    refused = outcome_of(reject, facts(diff=DIFF))
    assert refused.change == "rejected" and refused.decided == ("d1", "rejected")
    assert refused.record == RECORD and not refused.new_version


def test_a_diff_must_be_pending_current_and_the_records() -> None:
    approve = event("memory.review", decision="approve", reviewer="ana", diff_id="d1")
    assert "version 1" in rejected("stale_version", approve, facts(at=2, diff=DIFF))
    rejected("invalid_transition", approve,
             facts(diff=PendingDiff(**{**DIFF.__dict__, "state": "superseded"})))
    rejected("broken_reference", approve, facts())
    rejected("broken_reference", approve,
             facts(diff=PendingDiff(**{**DIFF.__dict__, "record_id": "mem_2"})))


def version(number: int, record: Record, change: str = "updated") -> RecordVersion:
    return RecordVersion(record_id=record.record_id, version=number, text=record.text,
                         body=record.body, fields=version_fields(record), change=change,
                         actor="writer", event_id=f"e{number}", changed_at=NOW)


def test_restore_brings_back_an_earlier_content_as_a_new_version() -> None:
    current = RECORD.model_copy(update={"text": "Changed.", "review_state": "deprecated",
                                        "tags": ("x",), "body": {"context": ["kept"]}})
    outcome = outcome_of(event("memory.restore", version=1),
                         facts(current, at=3, version=version(1, RECORD)))
    assert outcome.change == "restored" and outcome.reason == "restored version 1"
    assert outcome.record.text == RECORD.text
    assert (outcome.record.review_state, outcome.record.tags) == ("approved", ("ops",))
    assert outcome.record.body == {**RECORD.body, "context": ["kept"]}
    assert set(outcome.changed) == {"text", "tags", "review_state"}
    assert outcome_of(event("memory.restore", version=1),
                      facts(version=version(1, RECORD))).change == "unchanged"
    rejected("broken_reference", event("memory.restore", version=7), facts())


def test_a_diff_between_versions_names_each_changed_field_and_the_text() -> None:
    newer = RECORD.model_copy(update={"text": "Deploys of billing need no VPN.",
                                      "tags": ("ops", "billing")})
    diff = version_diff(version(1, RECORD), version(2, newer))
    assert diff["fields"] == {"tags": {"from": ["ops"], "to": ["ops", "billing"]}}
    assert diff["text"][:2] == ["--- v1", "+++ v2"]
    assert "-Deploys of billing need the VPN up." in diff["text"]
    assert "+Deploys of billing need no VPN." in diff["text"]


def test_an_approved_merge_supersedes_its_members() -> None:
    merge = RECORD.model_copy(update={"review_state": "draft", "trust_class": "derived",
                                      "body": {"merged_from": ["mem_2", "mem_3"]}})
    outcome = outcome_of(event("memory.review", decision="approve", reviewer="ana"),
                         facts(merge))
    assert outcome.supersedes == ("mem_2", "mem_3")
    rejected_merge = outcome_of(event("memory.review", decision="reject", reviewer="ana"),
                                facts(merge))
    assert rejected_merge.supersedes == (), "its members stay live"


def test_the_fifth_update_promotes_and_a_tag_free_review_does_not_count() -> None:
    fifth = outcome_of(event("memory.update", expected_version=5, text="Fifth wording."),
                       facts(at=5, updates=4))
    assert fifth.promoted_to == "short_term"
    fourth = outcome_of(event("memory.update", expected_version=4, text="Fourth wording."),
                        facts(at=4, updates=3))
    assert fourth.promoted_to is None
    draft = RECORD.model_copy(update={"review_state": "draft"})
    approval = outcome_of(event("memory.review", decision="approve", reviewer="ana"),
                          facts(draft, updates=4))
    assert approval.promoted_to is None, "a review changes no content"
    applied_diff = outcome_of(
        event("memory.review", decision="approve", reviewer="ana", diff_id="d1"),
        facts(diff=DIFF, updates=4))
    assert applied_diff.promoted_to == "short_term", "an approved diff is an update"


def test_a_field_given_as_null_sets_nothing() -> None:
    outcome = outcome_of(event("memory.update", expected_version=1, text="New text.",
                               tags=None, title=None), facts())
    assert outcome.changed == ("text",) and outcome.record.tags == RECORD.tags
    with pytest.raises(ValueError, match="null sets nothing"):
        event("memory.update", expected_version=1, tags=None)


NEWER = RECORD.model_copy(update={
    "record_id": "mem_9", "text": "Deploys of billing need the VPN and the bastion up.",
    "created_at": datetime(2026, 11, 24, tzinfo=UTC),
    "provenance": RECORD.provenance.model_copy(update={"producer": "agent-9"})})


def test_a_stale_memory_is_invalidated_as_a_version_of_its_own() -> None:
    outcome = invalidated(Current(RECORD, 1), NEWER, "4.2 -> 4.4", "inv_1")
    assert outcome.change == "invalidated" and outcome.new_version and not outcome.reembed
    assert outcome.changed == ("valid_until", "invalidated_by")
    assert (outcome.record.valid_until, outcome.record.invalidated_by) == (NEWER.created_at,
                                                                          "mem_9")
    assert outcome.record.text == RECORD.text, "it keeps what it said"
    assert outcome.actor == "agent-9" and "4.2 -> 4.4" in (outcome.reason or "")
    assert superseded_note(outcome.record) == "superseded by mem_9 on 2026-11-24"


def test_invalidating_a_protected_memory_waits_for_review_and_approving_applies_it() -> None:
    proposal = invalidated(Current(RECORD, 1), NEWER, "4.2 -> 4.4", "inv_1", ("approved",))
    assert proposal.change == "proposed" and not proposal.new_version
    assert proposal.proposal is not None and proposal.proposal.diff_id == "inv_1"
    diff = proposal.proposal
    approve = event("memory.review", decision="approve", reviewer="ana", diff_id="inv_1")
    applied = outcome_of(approve, facts(diff=diff), protect=("approved",))
    assert applied.change == "invalidated" and applied.decided == ("inv_1", "approved")
    assert applied.record.invalidated_by == "mem_9"
    assert applied.record.valid_until == NEWER.created_at


def test_an_invalidated_memory_changes_only_by_a_restore_which_reinstates_it() -> None:
    stale = invalidated(Current(RECORD, 1), NEWER, "x", "inv_1").record
    detail = rejected("invalid_transition", event("memory.update", expected_version=2,
                                                  text="y"), facts(stale, at=2))
    assert "superseded by mem_9 on 2026-11-24" in detail
    rejected("invalid_transition", event("memory.deprecate", reason="old"), facts(stale, at=2))
    restored = outcome_of(event("memory.restore", version=1),
                          facts(stale, at=2, version=version(1, RECORD)))
    assert restored.change == "restored"
    assert (restored.record.valid_until, restored.record.invalidated_by) == (None, None)
