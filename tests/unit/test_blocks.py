"""Core memory blocks: edits, the bracketed form, rotation by each strategy."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from memstream_client.events import MemoryBlockPayload
from processors.events.errors import Rejected
from processors.memory.blocks import (
    THRESHOLDS,
    Block,
    BlockDiff,
    approved_edit,
    archival_text,
    edit_block,
    empty_block,
    serialize,
)

LIMIT = 200


def edit(**payload: Any) -> MemoryBlockPayload:
    return MemoryBlockPayload.model_validate({"agent_id": "finn", "label": "human", **payload})


def human(**fields: Any) -> Block:
    block = empty_block("team-a", "finn", "human")
    return edit_block(block, edit(set=fields), 10_000).block


def test_fields_serialize_to_the_bracketed_form_in_the_order_first_set() -> None:
    block = human(USER="Alice | High school senior", TASK="Brainstorm essay topics",
                  PREFS=["Socratic questions", "Detailed feedback"])
    assert block.text == ("[USER] Alice | High school senior\n"
                          "[TASK] Brainstorm essay topics\n"
                          "[PREFS] Socratic questions; Detailed feedback")
    assert block.version == 1 and block.strategy == "adaptive" and block.threshold == 0.8


def test_set_replaces_append_adds_and_an_empty_value_removes() -> None:
    block = human(TASK="Essay", CONTEXT=["one"])
    edited = edit_block(block, edit(set={"TASK": ""}, append={"CONTEXT": ["two"]}), LIMIT)
    assert edited.block.fields == {"CONTEXT": ("one", "two")}
    assert edited.changed == ("CONTEXT", "TASK") and edited.archived == ()
    assert edited.block.version == 2


def test_a_stale_edit_is_refused() -> None:
    with pytest.raises(Rejected) as caught:
        edit_block(human(TASK="x"), edit(set={"TASK": "y"}, expected_version=2), LIMIT)
    assert caught.value.reason == "stale_version"


def notes(count: int) -> list[str]:
    return [f"Discussed topic number {n:02d} at length" for n in range(count)]


@pytest.mark.parametrize("strategy", ["aggressive", "preservative", "adaptive"])
def test_a_full_block_rotates_to_half_its_limit_and_nothing_is_lost(strategy: str) -> None:
    block = edit_block(human(USER="Alice", TASK="Essay topics"),
                       edit(strategy=strategy), 10_000).block
    edited = edit_block(block, edit(append={"CONTEXT": notes(6)}), LIMIT)
    assert edited.usage_before_rotation > THRESHOLDS[strategy]  # type: ignore[index]
    assert len(edited.block.text) <= LIMIT * 0.5
    before = serialize({**block.fields, "CONTEXT": tuple(notes(6))}).splitlines()
    kept = edited.block.text.splitlines()
    for line in before:
        name, _, value = line.partition(" ")
        for item in value.split("; "):
            assert any(item in k for k in kept) or f"{name} {item}" in edited.archived


def test_aggressive_lets_the_oldest_go_and_preservative_keeps_single_texts() -> None:
    base = human(USER="Alice", TASK="Essay topics")
    aggressive = edit_block(edit_block(base, edit(strategy="aggressive"), 10_000).block,
                            edit(append={"CONTEXT": notes(6)}), LIMIT)
    assert aggressive.archived[:2] == ("[USER] Alice", "[TASK] Essay topics")
    preservative = edit_block(edit_block(base, edit(strategy="preservative"), 10_000).block,
                              edit(append={"CONTEXT": notes(8)}), LIMIT)
    assert preservative.block.fields["USER"] == "Alice"
    assert preservative.archived[0] == f"[CONTEXT] {notes(8)[0]}"


def test_adaptive_lets_the_least_important_go_first() -> None:
    base = human(TASK="Essay topics", CONTEXT=notes(2), HOBBY="Chess and long walks by the sea")
    edited = edit_block(base, edit(append={"CONTEXT": notes(6)[2:]}), LIMIT)
    assert "[HOBBY] Chess and long walks by the sea" in edited.archived
    assert edited.block.fields["TASK"] == "Essay topics"
    assert edited.block.fields["CONTEXT"][-1] == notes(6)[-1], "the newest note stays"


def test_the_adaptive_threshold_moves_with_how_often_the_block_rotates() -> None:
    block = human(TASK="x")
    for n in range(10):  # each edit fills the block past its threshold
        block = edit_block(block, edit(set={"CONTEXT": [f"{n} " + "y" * 170]}), LIMIT).block
    assert block.threshold == 0.85
    quiet = human(TASK="x")
    for n in range(10):
        quiet = edit_block(quiet, edit(set={"TASK": f"task {n}"}), LIMIT).block
    assert quiet.threshold == 0.75


def test_the_archive_names_its_block_and_version() -> None:
    block = human(TASK="x")
    text = archival_text(block, ["[CONTEXT] old"], datetime(2026, 11, 23, 10, tzinfo=UTC))
    assert text == ("[ARCHIVED 2026-11-23T10:00:00+00:00] from block human of finn, "
                    "version 1\n[CONTEXT] old")


def diff(block: Block, base_version: int, state: str = "pending") -> BlockDiff:
    return BlockDiff(diff_id="d1", namespace=block.namespace, agent_id=block.agent_id,
                     label=block.label, base_version=base_version,
                     payload=edit(set={"TASK": "Outline the essay"}), proposer="agent-7",
                     proposed_at=datetime(2026, 11, 23, tzinfo=UTC),
                     state=state)  # type: ignore[arg-type]


def test_an_approved_diff_is_the_edit_it_proposed_on_the_block_it_was_made_for() -> None:
    block = human(TASK="Essay topics")
    approved = approved_edit(block, diff(block, 1), LIMIT)
    assert approved.block.fields["TASK"] == "Outline the essay"
    assert approved.block.version == 2
    for stale, reason in ((diff(block, 0), "stale_version"),
                          (diff(block, 1, "superseded"), "invalid_transition")):
        with pytest.raises(Rejected) as caught:
            approved_edit(block, stale, LIMIT)
        assert caught.value.reason == reason
