"""How sure memory is of a record (seed 001's confidence scores and thresholds).

A record's confidence starts from who vouches for it, and moves with what happened to it:

- its trust class: `raw` (a writer stated it, and it stands as stated) 0.7, `derived` (the
  system made it from several records: a merge, a digest, a learning) 0.75, `approved` (a
  reviewer approved it) 0.9;
- its review state: a draft loses 0.2 (nobody has looked at it yet); a deprecated record is
  0 (its writer or a reviewer withdrew it);
- restatements: each write that restated it (a write-time twin) closes 30% of what is
  left to 1, so that three independent restatements of a raw memory reach 0.9;
- ratings, where agents gave them: each agent that rated it casts one vote (useful when
  most of its ratings were, not useful when most were not), and the votes move the
  confidence only once three agents have voted, by at most 0.15 either way. One agent,
  however often it rates, never moves what the others see (issue 20's guarantee that
  ratings are per agent holds for the thresholds too).

A read keeps the records at or above `min_confidence`, and, without one, those of each tier
at or above its threshold: seed 001's 0.7 for the long-term tier, where consolidated
knowledge lives, and none for the tiers that hold work in progress. A statement as written
meets the long-term threshold; a draft does not until it is approved, nor does a memory most
of three or more agents found not useful.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import get_args

from memstream_client.events import Tier

TRUST_PRIOR = {"raw": 0.7, "derived": 0.75, "approved": 0.9}
DRAFT_PENALTY = 0.2
# The share of the distance to 1 that each restatement closes.
RESTATEMENT_GAIN = 0.3
# Votes needed before ratings move confidence (the seed's "neutral below 3 valuations",
# counted in agents rather than ratings), and how far they can move it.
MIN_VOTERS = 3
MAX_RATING_SHIFT = 0.15
# Seed 001's `confidence_threshold` default of its long-term search.
DEFAULT_TIER_THRESHOLDS: Mapping[str, float] = {"long_term": 0.7}


@dataclass(frozen=True)
class Votes:
    """The agents that rated a record: how many, and how many of them found it useful."""

    voters: int = 0
    useful: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.useful <= self.voters:
            raise ValueError(f"useful voters {self.useful} outside 0..{self.voters}")


NO_VOTES = Votes()


def confidence_of(trust_class: str, review_state: str, restated: int = 0,
                  votes: Votes = NO_VOTES) -> float:
    """The confidence of a record, in [0, 1], rounded to 4 places (it is stored and shown)."""
    if review_state == "deprecated":
        return 0.0
    score = TRUST_PRIOR.get(trust_class, TRUST_PRIOR["raw"])
    if review_state == "draft":
        score -= DRAFT_PENALTY
    score = 1.0 - (1.0 - score) * (1.0 - RESTATEMENT_GAIN) ** max(restated, 0)
    if votes.voters >= MIN_VOTERS:
        score += (votes.useful / votes.voters - 0.5) * 2 * MAX_RATING_SHIFT
    return round(min(max(score, 0.0), 1.0), 4)


def agent_vote(valuations: int, useful: int) -> bool | None:
    """One agent's vote from its ratings of a record: useful when most were, not useful
    when most were not, none on a tie."""
    if useful * 2 > valuations:
        return True
    if useful * 2 < valuations:
        return False
    return None


def votes_of(per_agent: Mapping[str, tuple[int, int]]) -> Votes:
    """The votes of agents from each one's (valuations, useful ratings) of a record."""
    cast = [vote for valuations, useful in per_agent.values()
            if (vote := agent_vote(valuations, useful)) is not None]
    return Votes(len(cast), sum(cast))


def threshold_for(tier: str, min_confidence: float | None,
                  tier_thresholds: Mapping[str, float]) -> float:
    """The confidence a record of `tier` needs to be shown: the read's `min_confidence` when
    it asks for one, else its tier's threshold (0 for a tier without one)."""
    if min_confidence is not None:
        return min_confidence
    return tier_thresholds.get(tier, 0.0)


def confident_enough(confidence: float, tier: str, min_confidence: float | None,
                     tier_thresholds: Mapping[str, float]) -> bool:
    """Whether a record is shown by a read with these thresholds."""
    return confidence >= threshold_for(tier, min_confidence, tier_thresholds)


def tier_thresholds_of(raw: str) -> dict[str, float]:
    """`tier=threshold,...` (MEMSTREAM_CONFIDENCE_THRESHOLDS) over the defaults; a tier named
    with `off` (or 0) has none. Raises ValueError with the reason for anything else."""
    thresholds = dict(DEFAULT_TIER_THRESHOLDS)
    for entry in filter(None, (part.strip() for part in raw.split(","))):
        tier, _, value = (part.strip() for part in entry.partition("="))
        if tier not in get_args(Tier):
            raise ValueError(f"{entry!r}: unknown tier {tier!r}; expected one of "
                             f"{', '.join(get_args(Tier))}")
        try:
            threshold = 0.0 if value.lower() == "off" else float(value)
        except ValueError:
            raise ValueError(f"{entry!r}: expected tier=threshold, a number in [0, 1] or off"
                             ) from None
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"{entry!r}: a threshold is in [0, 1]")
        thresholds[tier] = threshold
    return {tier: threshold for tier, threshold in thresholds.items() if threshold > 0.0}
