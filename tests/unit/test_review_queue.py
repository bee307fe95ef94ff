"""The review queue's pure parts: one list of pending diffs and draft merges, oldest first,
each with the review bodies that decide it, and how the CLI names what an item changes."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from memstream_client.answers.review import ReviewItem
from memstream_client.cli.commands import awaiting_of
from memstream_client.events import MemoryBlockPayload
from processors.memory.blocks import BlockDiff
from processors.memory.lifecycle import PendingDiff
from stores.record_versions import DraftMerge, MergeMember, ProposedLearningDraft
from stores.records import FoundRecord
from streams.api.memory.review_queue import queue_items

T0 = datetime(2026, 11, 21, 11, 0, tzinfo=UTC)


def record(record_id: str, text: str) -> FoundRecord:
    return FoundRecord(
        record_id=record_id, record_kind="memory", title="Deploys", text=text, body={},
        source_ref=None, created_at=T0, related_ids=(), tags=(), scope="shared",
        agent_id=None, review_state="approved", trust_class="asserted", tier="active",
        run_ref=None, version=1, memory_type="fact", thread=None, provenance={},
        expires_at=None, embedding=None)


def diff(diff_id: str, record_id: str, minutes: int) -> PendingDiff:
    return PendingDiff(diff_id=diff_id, namespace="team-a", record_id=record_id,
                       base_version=1, proposed={"text": "Deploys go through the bastion."},
                       proposer="agent-7", proposed_at=T0 + timedelta(minutes=minutes))


def merge(record_id: str, minutes: int) -> DraftMerge:
    members = tuple(MergeMember(record_id=f"{record_id}-m{n}", version=1, title=None,
                                excerpt=f"Deploys need the VPN ({n}).",
                                review_state="approved", superseded_by=None)
                    for n in (1, 2))
    return DraftMerge(record_id=record_id, version=1, title=None,
                      text="Deploys need the VPN.", memory_type="fact", scope="shared",
                      agent_id=None, proposer="memstream-trigger",
                      proposed_at=T0 + timedelta(minutes=minutes), members=members)


def learning(record_id: str, minutes: int) -> ProposedLearningDraft:
    return ProposedLearningDraft(
        record_id=record_id, version=2, title="Lesson: TimeoutError: connection timed out",
        text="Lesson: when TimeoutError occurs, 3 runs fixed it.", memory_type="lesson",
        scope="shared", agent_id=None, source_ref="fix_pattern:fix_1",
        related_ids=("fix_1", "dig_3"), proposer="memstream.run-learnings",
        proposed_at=T0 + timedelta(minutes=minutes))


def block_diff(minutes: int) -> BlockDiff:
    return BlockDiff(diff_id="blk-1", namespace="team-a", agent_id="finn", label="human",
                     base_version=2,
                     payload=MemoryBlockPayload(agent_id="finn", label="human",
                                                set={"TASK": "Migrate the deploys"}),
                     proposer="finn", proposed_at=T0 + timedelta(minutes=minutes))


def shown(item: ReviewItem) -> dict[str, Any]:
    """An item as the route sends it."""
    answer: dict[str, Any] = json.loads(item.rendered())
    return answer


def test_the_queue_holds_diffs_and_draft_merges_oldest_first() -> None:
    items = [shown(item) for item in queue_items(
        "team-a", [diff("upd-2", "mem_a", 20), diff("upd-1", "mem_b", 5)], [block_diff(10)],
        [merge("mem_m", 15), merge("mem_l", 15)],
        {"mem_a": record("mem_a", "Deploys need the VPN.")}, [learning("mem_p", 12)])]
    assert [(item["kind"], item["id"]) for item in items] == [
        ("pending_diff", "upd-1"), ("pending_diff", "blk-1"), ("proposed_lesson", "mem_p"),
        ("draft_merge", "mem_l"),
        ("draft_merge", "mem_m"), ("pending_diff", "upd-2")]
    last = items[-1]
    # A diff shows its record as it is now, and everything /v1/pending-diffs gives it.
    assert (last["record_id"], last["title"], last["text"]) == (
        "mem_a", "Deploys", "Deploys need the VPN.")
    assert (last["target"], last["base_version"], last["proposer"], last["proposed"]) == (
        "record", 1, "agent-7", {"text": "Deploys go through the bastion."})
    assert last["proposed_at"] == "2026-11-21T11:20:00+00:00"
    # A record the reader may not see is no subject: nothing of it is shown.
    assert (items[0]["title"], items[0]["text"]) == (None, None)
    block = items[1]
    assert (block["record_id"], block["block"]) == (None, {"agent_id": "finn",
                                                           "label": "human"})
    assert block["review"]["approve"] == {"namespace": "team-a", "decision": "approve",
                                          "block": {"agent_id": "finn", "label": "human"},
                                          "diff_id": "blk-1"}


def test_a_draft_merge_lists_its_members_and_is_reviewed_by_its_record_id() -> None:
    (item,) = [shown(item) for item in queue_items("team-a", [], [], [merge("mem_m", 0)], {},
                                                   [])]
    assert (item["id"], item["record_id"], item["text"], item["proposer"]) == (
        "mem_m", "mem_m", "Deploys need the VPN.", "memstream-trigger")
    assert [(m["record_id"], m["excerpt"], m["superseded_by"]) for m in item["members"]] == [
        ("mem_m-m1", "Deploys need the VPN (1).", None),
        ("mem_m-m2", "Deploys need the VPN (2).", None)]
    assert item["review"] == {
        "route": "POST /v1/reviews",
        "approve": {"namespace": "team-a", "decision": "approve", "record_id": "mem_m"},
        "reject": {"namespace": "team-a", "decision": "reject", "record_id": "mem_m"}}


def test_the_cli_names_what_an_item_would_change() -> None:
    # As the SDK reads the route's answer.
    items = [ReviewItem.model_validate_json(item.rendered()) for item in queue_items(
        "team-a", [diff("upd-1", "mem_a", 0)], [block_diff(1)], [merge("mem_m", 2)], {},
        [learning("mem_p", 3)])]
    assert [awaiting_of(item) for item in items] == [
        "mem_a", "block finn/human", "merge of 2", "lesson from fix_pattern:fix_1"]


def test_a_proposed_lesson_says_what_it_is_learnt_from_and_is_reviewed_as_a_draft() -> None:
    (item,) = [shown(item) for item in queue_items("team-a", [], [], [], {},
                                                   [learning("mem_p", 0)])]
    assert (item["kind"], item["id"], item["record_id"], item["version"]) == (
        "proposed_lesson", "mem_p", "mem_p", 2)
    assert (item["memory_type"], item["source_ref"], item["related_ids"], item["proposer"]) == (
        "lesson", "fix_pattern:fix_1", ["fix_1", "dig_3"], "memstream.run-learnings")
    assert item["review"] == {
        "route": "POST /v1/reviews",
        "approve": {"namespace": "team-a", "decision": "approve", "record_id": "mem_p"},
        "reject": {"namespace": "team-a", "decision": "reject", "record_id": "mem_p"}}
    # A lesson is no diff, no merge: their fields are absent, not null.
    assert {"diff_id", "target", "block", "base_version", "proposed", "state",
            "members"}.isdisjoint(item)
