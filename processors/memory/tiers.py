"""Memory tiers (seed 001): active → short_term → long_term.

A memory moves up by use and by consolidation, never down:
- every `updates_per_tier` content updates (5 by default: the seed's `min_update_count`)
  move it one tier up;
- a merge made by consolidation sits one tier above its most durable member.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from memstream_client.events import Tier

TIERS: tuple[Tier, ...] = ("active", "short_term", "long_term")


@dataclass(frozen=True)
class TierRules:
    updates_per_tier: int = 5


def tier_after_updates(tier: Tier, updates: int, rules: TierRules) -> Tier:
    """The tier a memory updated `updates` times in all has earned: at least `tier`."""
    earned = TIERS[min(updates // rules.updates_per_tier, len(TIERS) - 1)]
    return max(tier, earned, key=TIERS.index)


def merged_tier(member_tiers: Iterable[Tier]) -> Tier:
    """One tier above the most durable member (long_term stays long_term)."""
    top = max((TIERS.index(tier) for tier in member_tiers), default=0)
    return TIERS[min(top + 1, len(TIERS) - 1)]
