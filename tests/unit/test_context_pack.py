"""Packing a context pack: core blocks first within their share, never over the budget,
sections in order, near-duplicates out."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from processors.recall.context_pack import (
    CORE_SHARE,
    DEFAULT_SHARES,
    Candidate,
    CoreBlock,
    CoreField,
    pack,
    shares_of,
)

RNG = np.random.default_rng(3)


def unit(vector: np.ndarray) -> np.ndarray:  # type: ignore[type-arg]
    return (vector / np.linalg.norm(vector)).astype(np.float32)


def candidate(record_id: str, section: str, tokens: int,
              vector: np.ndarray | None = None) -> Candidate:  # type: ignore[type-arg]
    return Candidate(
        section=section, record_id=record_id, kind="memory", text=f"text of {record_id}",
        source=f"record:{record_id}", trust_class="raw", provenance={"source_event_id": "e"},
        created_at=datetime(2026, 11, 1, tzinfo=UTC), age_days=1.0, score=0.5, token_cost=tokens,
        vector=unit(RNG.standard_normal(384)) if vector is None else vector)


@given(st.lists(st.tuples(st.sampled_from(["planning", "history", "long_term", "documents"]),
                          st.integers(min_value=0, max_value=600)), max_size=40),
       st.integers(min_value=0, max_value=4000))
def test_a_pack_never_exceeds_its_budget(items: list[tuple[str, int]], budget: int) -> None:
    candidates = [candidate(f"r{n}", section, tokens)
                  for n, (section, tokens) in enumerate(items)]
    packed = pack(candidates, budget)
    assert packed.tokens == sum(item.token_cost for item in packed.items) <= budget
    # Random vectors are never near-duplicates: whatever is left out did not fit, even in
    # what remained at the end.
    assert packed.dropped["duplicate"] == 0
    left = budget - packed.tokens
    assert all(c.token_cost > left for c in candidates if c not in packed.items)


def test_sections_come_in_the_seeds_order_and_order_is_kept_within() -> None:
    packed = pack([candidate("m1", "long_term", 10), candidate("d1", "documents", 10),
                   candidate("h1", "history", 10), candidate("p1", "planning", 5),
                   candidate("m2", "long_term", 10), candidate("h2", "history", 10)], 100)
    assert [item.record_id for item in packed.items] == ["p1", "h1", "h2", "m1", "m2", "d1"]


def test_a_section_with_much_to_say_does_not_crowd_out_the_next() -> None:
    history = [candidate(f"h{n}", "history", 10) for n in range(20)]
    packed = pack([*history, candidate("m1", "long_term", 30),
                   candidate("d1", "documents", 15)], 100)
    # history: its 25 and planning's unused 15 hold 4 of 10 tokens; long-term and documents
    # keep their shares; the 15 tokens they leave take one more of history's, then 5 are left.
    assert [item.record_id for item in packed.items] == [
        "h0", "h1", "h2", "h3", "h4", "m1", "d1"]
    assert {name: (use.share_tokens, use.tokens, use.items)
            for name, use in packed.sections.items()} == {
        "planning": (15, 0, 0), "history": (25, 50, 5), "long_term": (40, 30, 1),
        "documents": (20, 15, 1)}
    assert packed.dropped == {"budget": 15, "duplicate": 0} and packed.tokens == 95


def test_a_share_left_unused_is_passed_on_and_the_rest_fills_at_the_end() -> None:
    alone = pack([candidate(f"m{n}", "long_term", 20) for n in range(5)], 100)
    assert len(alone.items) == 5 and alone.tokens == 100
    # Set aside in its turn (history's room is 40), the big one fits in what is left.
    late = pack([candidate("h-big", "history", 50), candidate("m1", "long_term", 10)], 100)
    assert [item.record_id for item in late.items] == ["h-big", "m1"]


def test_shares_are_configured_by_section() -> None:
    assert shares_of("") == DEFAULT_SHARES
    assert shares_of("documents=0, long_term=0.6") == {
        **DEFAULT_SHARES, "documents": 0.0, "long_term": 0.6}
    packed = pack([candidate(f"h{n}", "history", 10) for n in range(10)], 100,
                  shares=shares_of("planning=0,history=1,long_term=0,documents=0"))
    assert packed.sections["history"].share_tokens == 100 and len(packed.items) == 10
    for wrong, said in (("memories=0.5", "not a section share"), ("history", "section=share"),
                        ("history=much", "not a number"), ("history=2", "in [0, 1]"),
                        ("history=0.1,history=0.2", "given twice"),
                        ("planning=0,history=0,long_term=0,documents=0", "all 0")):
        with pytest.raises(ValueError, match=re.escape(said)):
            shares_of(wrong)


def test_an_item_too_big_is_skipped_and_a_smaller_one_after_it_still_fits() -> None:
    packed = pack([candidate("big", "history", 90), candidate("small", "history", 5),
                   candidate("medium", "long_term", 10)], 20)
    assert [item.record_id for item in packed.items] == ["small", "medium"]
    assert packed.dropped == {"budget": 1, "duplicate": 0}


def test_a_near_duplicate_of_an_item_taken_is_dropped() -> None:
    base = unit(RNG.standard_normal(384))
    twin = unit(base + 0.01 * RNG.standard_normal(384))
    packed = pack([candidate("a", "history", 5, base), candidate("b", "long_term", 5, twin),
                   candidate("c", "long_term", 5)], 100)
    assert [item.record_id for item in packed.items] == ["a", "c"]
    assert packed.dropped == {"budget": 0, "duplicate": 1}


def core_block(label: str, *costs: int) -> CoreBlock:
    """A block whose fields F0, F1, … cost these tokens."""
    return CoreBlock(label, 1, tuple(CoreField(f"F{n}", f"[F{n}] {label} {n}", cost)
                                     for n, cost in enumerate(costs)))


def test_core_blocks_come_first_and_whole_when_they_fit_in_their_share() -> None:
    packed = pack([candidate("h1", "history", 30), candidate("m1", "long_term", 30)], 100,
                  [core_block("human", 10, 15), core_block("persona", 20)])
    assert [(b.label, b.token_cost, b.left_out) for b in packed.core.blocks] == [
        ("human", 25, ()), ("persona", 20, ())]
    assert packed.core.blocks[0].text == "[F0] human 0\n[F1] human 1"
    assert (packed.core.tokens, packed.core.share_tokens, packed.core.truncated) == (
        45, 50, False)
    # What the blocks leave of their share goes to the sections: 55 tokens, of which
    # history's room (with planning's unused 8) is 21 and long-term's (with history's) 43.
    assert [item.record_id for item in packed.items] == ["m1"]
    assert packed.tokens == 75 and packed.dropped["budget"] == 1


def test_blocks_over_their_share_lose_fields_named_and_leave_the_rest_to_memories() -> None:
    packed = pack([candidate("m1", "long_term", 50)], 100,
                  [core_block("human", 30, 40, 5), core_block("persona", 60)])
    human, persona = packed.core.blocks
    assert (human.left_out, [f.name for f in human.kept]) == (("F1",), ["F0", "F2"])
    assert (persona.left_out, persona.kept, persona.text) == (("F0",), (), "")
    assert packed.core.truncated and packed.core.tokens == 35
    assert [item.record_id for item in packed.items] == ["m1"] and packed.tokens == 85


def test_no_blocks_leave_the_whole_budget_to_the_sections() -> None:
    packed = pack([candidate("m1", "long_term", 100)], 100)
    assert packed.core.blocks == [] and packed.core.tokens == 0
    assert [item.record_id for item in packed.items] == ["m1"]


@given(st.lists(st.lists(st.integers(min_value=0, max_value=300), max_size=6), max_size=4),
       st.lists(st.integers(min_value=0, max_value=600), max_size=20),
       st.integers(min_value=0, max_value=2000))
def test_core_never_takes_more_than_its_share_nor_the_pack_more_than_its_budget(
    blocks: list[list[int]], items: list[int], budget: int,
) -> None:
    core = [core_block(f"b{n}", *costs) for n, costs in enumerate(blocks)]
    packed = pack([candidate(f"r{n}", "long_term", tokens) for n, tokens in enumerate(items)],
                  budget, core)
    assert packed.core.tokens == sum(b.token_cost for b in packed.core.blocks)
    assert packed.core.tokens <= int(budget * CORE_SHARE)
    assert packed.tokens == packed.core.tokens + sum(i.token_cost for i in packed.items)
    assert packed.tokens <= budget
    # Every block is answered, and each of its fields is either kept or named as left out.
    assert [b.label for b in packed.core.blocks] == [b.label for b in core]
    for given_block, packed_block in zip(core, packed.core.blocks, strict=True):
        assert sorted([f.name for f in packed_block.kept] + list(packed_block.left_out)) == \
            sorted(f.name for f in given_block.fields)
    left = packed.core.share_tokens - packed.core.tokens
    assert all(f.token_cost > left for b in core for f in b.fields
               if f.name in next(p for p in packed.core.blocks if p.label == b.label).left_out)
