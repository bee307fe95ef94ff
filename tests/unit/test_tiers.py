"""Tiers move up by use and by consolidation, never down."""

from __future__ import annotations

import pytest

from processors.memory.tiers import TierRules, merged_tier, tier_after_updates

RULES = TierRules(updates_per_tier=5)


@pytest.mark.parametrize("tier, updates, earned", [
    ("active", 0, "active"), ("active", 4, "active"), ("active", 5, "short_term"),
    ("active", 9, "short_term"), ("active", 10, "long_term"), ("active", 99, "long_term"),
    ("long_term", 1, "long_term"), ("short_term", 2, "short_term"),
])
def test_every_five_updates_move_a_memory_one_tier_up(tier: str, updates: int,
                                                       earned: str) -> None:
    assert tier_after_updates(tier, updates, RULES) == earned  # type: ignore[arg-type]


def test_a_merge_sits_one_tier_above_its_most_durable_member() -> None:
    assert merged_tier(["active", "active"]) == "short_term"
    assert merged_tier(["active", "short_term"]) == "long_term"
    assert merged_tier(["long_term", "active"]) == "long_term"
