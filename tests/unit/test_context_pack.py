"""Packing a context pack: never over the budget, sections in order, near-duplicates out."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from processors.context_pack import Candidate, pack

RNG = np.random.default_rng(3)


def unit(vector: np.ndarray) -> np.ndarray:  # type: ignore[type-arg]
    return (vector / np.linalg.norm(vector)).astype(np.float32)


def candidate(record_id: str, section: str, tokens: int,
              vector: np.ndarray | None = None) -> Candidate:  # type: ignore[type-arg]
    return Candidate(
        section=section, record_id=record_id, kind="memory", text=f"text of {record_id}",
        source=f"record:{record_id}", trust_class="raw", provenance={"source_event_id": "e"},
        created_at="2026-11-01T00:00:00+00:00", age_days=1.0, score=0.5, token_cost=tokens,
        vector=unit(RNG.standard_normal(384)) if vector is None else vector)


@given(st.lists(st.tuples(st.sampled_from(["history", "long_term"]),
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


def test_history_comes_before_long_term_and_order_is_kept_within() -> None:
    packed = pack([candidate("m1", "long_term", 10), candidate("h1", "history", 10),
                   candidate("m2", "long_term", 10), candidate("h2", "history", 10)], 100)
    assert [item.record_id for item in packed.items] == ["h1", "h2", "m1", "m2"]


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
