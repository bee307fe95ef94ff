"""Confidence (seed 001): from trust class and review state, restatements and agents' votes;
the thresholds a read applies, per tier or as asked."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from processors.recall.confidence import (
    DEFAULT_TIER_THRESHOLDS,
    MIN_VOTERS,
    NO_VOTES,
    Votes,
    agent_vote,
    confidence_of,
    confident_enough,
    tier_thresholds_of,
    votes_of,
)

TRUST = st.sampled_from(["raw", "derived", "approved"])
REVIEW = st.sampled_from(["draft", "approved", "deprecated"])


def test_a_statement_as_written_meets_the_long_term_threshold_and_a_draft_does_not() -> None:
    threshold = DEFAULT_TIER_THRESHOLDS["long_term"]
    assert confidence_of("raw", "approved") >= threshold
    assert confidence_of("derived", "draft") < threshold
    assert confidence_of("approved", "approved") == 0.9
    assert confidence_of("raw", "deprecated") == 0.0


def test_restatements_raise_confidence_toward_one() -> None:
    steps = [confidence_of("raw", "approved", restated) for restated in range(6)]
    assert steps == sorted(steps) and len(set(steps)) == 6
    assert steps[3] == pytest.approx(1 - 0.3 * 0.7 ** 3, abs=1e-4)


def test_votes_move_confidence_only_once_three_agents_voted() -> None:
    base = confidence_of("raw", "approved")
    assert confidence_of("raw", "approved", votes=Votes(MIN_VOTERS - 1, 0)) == base
    assert confidence_of("raw", "approved", votes=Votes(3, 0)) == pytest.approx(base - 0.15)
    assert confidence_of("raw", "approved", votes=Votes(3, 3)) == pytest.approx(base + 0.15)


def test_an_agent_casts_one_vote_however_often_it_rates() -> None:
    assert agent_vote(1000, 0) is False and agent_vote(3, 2) is True
    assert agent_vote(2, 1) is None
    assert votes_of({"ann": (1000, 0), "bob": (1, 1), "cy": (4, 2)}) == Votes(2, 1)


@given(trust=TRUST, review=REVIEW, restated=st.integers(0, 50),
       ratings=st.lists(st.tuples(st.integers(1, 1000), st.floats(0, 1)), max_size=8))
def test_confidence_is_a_share_and_one_agent_never_moves_it(
        trust: str, review: str, restated: int, ratings: list[tuple[int, float]]) -> None:
    per_agent = {f"a{n}": (count, round(count * share)) for n, (count, share) in
                 enumerate(ratings)}
    votes = votes_of(per_agent)
    value = confidence_of(trust, review, restated, votes)
    assert 0.0 <= value <= 1.0
    if votes.voters < MIN_VOTERS:
        assert value == confidence_of(trust, review, restated, NO_VOTES)
    # However many ratings one agent adds, it is one vote among the others.
    for agent, (count, useful) in per_agent.items():
        heavier = {**per_agent, agent: (count * 1000, useful * 1000)}
        assert votes_of(heavier) == votes


@given(confidence=st.floats(0, 1), tier=st.sampled_from(["active", "short_term", "long_term"]),
       asked=st.none() | st.floats(0, 1))
def test_a_read_asks_for_its_min_confidence_or_else_the_tiers(
        confidence: float, tier: str, asked: float | None) -> None:
    shown = confident_enough(confidence, tier, asked, DEFAULT_TIER_THRESHOLDS)
    needed = asked if asked is not None else DEFAULT_TIER_THRESHOLDS.get(tier, 0.0)
    assert shown == (confidence >= needed)


def test_tier_thresholds_are_read_over_the_defaults_and_refused_with_a_reason() -> None:
    assert tier_thresholds_of("") == {"long_term": 0.7}
    assert tier_thresholds_of("short_term=0.5, long_term=off") == {"short_term": 0.5}
    for raw, reason in (("forever=0.5", "unknown tier 'forever'"),
                        ("long_term=high", "a number in"), ("long_term=1.5", r"in \[0, 1\]")):
        with pytest.raises(ValueError, match=reason):
            tier_thresholds_of(raw)
