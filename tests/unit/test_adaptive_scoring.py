"""Seed 003's adaptive scores, statement by statement: the parameter table's defaults, neutral
usefulness under three valuations, rehabilitation of negatives, recency's decay and floor,
frequency's cap, the hard floor, the blend and what boost 0 leaves, and the config's
validation; then worked examples computed by hand from the seed's formula."""

from __future__ import annotations

import dataclasses
import itertools
import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from processors.recall.adaptive_scoring import (
    AdaptiveScore,
    InvalidScoringConfig,
    MemoryUse,
    ScoringConfig,
    adaptive_score,
    blended,
    frequency,
    recency,
    rerank,
    scoring_config_problems,
    updated_config,
    usefulness,
)

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
DEFAULTS = ScoringConfig()


def days_ago(days: float) -> datetime:
    return NOW - timedelta(days=days)


FRACTIONS = st.floats(min_value=0.0, max_value=1.0)
HALF_LIVES = st.floats(min_value=0.01, max_value=3650.0)


@st.composite
def configs(draw: st.DrawFn) -> ScoringConfig:
    usefulness_weight = draw(FRACTIONS)
    recency_weight = draw(st.floats(min_value=0.0, max_value=1.0 - usefulness_weight))
    return ScoringConfig(
        min_valuations_for_signal=draw(st.integers(min_value=1, max_value=20)),
        recency_half_life_days=draw(HALF_LIVES),
        rehabilitation_half_life_days=draw(HALF_LIVES),
        adaptive_score_floor=draw(FRACTIONS),
        frequency_log_cap=draw(st.integers(min_value=1, max_value=10_000)),
        blend_usefulness_weight=usefulness_weight,
        blend_recency_weight=recency_weight,
        blend_frequency_weight=max(0.0, 1.0 - usefulness_weight - recency_weight),
        blend_base_factor=draw(st.floats(min_value=0.01, max_value=1.0)),
        blend_boost_factor=draw(FRACTIONS),
        neutral_usefulness=draw(FRACTIONS),
        recency_floor=draw(FRACTIONS),
    )


# Up to ten years back, and a day ahead: another worker's clock may run early.
MOMENTS = st.floats(min_value=-1.0, max_value=3650.0).map(days_ago)


@st.composite
def uses(draw: st.DrawFn) -> MemoryUse:
    valuations = draw(st.integers(min_value=0, max_value=2000))
    accesses = draw(st.integers(min_value=0, max_value=100_000))
    return MemoryUse(
        useful_count=draw(st.integers(min_value=0, max_value=valuations)),
        valuation_count=valuations,
        last_valued_at=draw(MOMENTS) if valuations else None,
        access_count=accesses,
        last_accessed_at=draw(MOMENTS) if accesses else None,
    )


RAW = st.floats(min_value=0.0, max_value=1e6)
ADAPTIVE = FRACTIONS
IDS = st.text(alphabet="abcdef0123456789", min_size=1, max_size=8)


@st.composite
def ranked_hits(draw: st.DrawFn) -> list[tuple[str, float]]:
    """Hits as a search gives them: distinct ids, best first (ties included)."""
    ids = draw(st.lists(IDS, unique=True, max_size=30))
    raws = sorted(draw(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]) | RAW,
                                min_size=len(ids), max_size=len(ids))), reverse=True)
    return list(zip(ids, raws, strict=True))


# The parameter table


def test_the_defaults_are_the_seeds_table() -> None:
    assert dataclasses.asdict(DEFAULTS) == {
        "min_valuations_for_signal": 3,
        "recency_half_life_days": 30,
        "rehabilitation_half_life_days": 90,
        "adaptive_score_floor": 0.35,
        "frequency_log_cap": 50,
        "blend_usefulness_weight": 0.60,
        "blend_recency_weight": 0.25,
        "blend_frequency_weight": 0.15,
        "blend_base_factor": 0.70,
        "blend_boost_factor": 0.30,
        # Stated in the seed's prose: "a neutral score of 0.5", recency "floored at 0.30".
        "neutral_usefulness": 0.5,
        "recency_floor": 0.30,
    }


# Usefulness


@given(configs(), uses())
def test_fewer_valuations_than_the_minimum_are_neutral(config: ScoringConfig,
                                                       use: MemoryUse) -> None:
    assume(use.valuation_count < config.min_valuations_for_signal)
    assert usefulness(use, NOW, config) == config.neutral_usefulness


@pytest.mark.parametrize("useful, valuations", [(0, 1), (0, 2), (1, 2), (2, 2)])
def test_one_or_two_valuations_cannot_move_usefulness(useful: int, valuations: int) -> None:
    use = MemoryUse(useful, valuations, days_ago(0))
    assert usefulness(use, NOW, DEFAULTS) == 0.5


@given(configs(), uses())
def test_usefulness_is_the_share_of_useful_valuations_unless_negative(
        config: ScoringConfig, use: MemoryUse) -> None:
    assume(use.valuation_count >= config.min_valuations_for_signal)
    share = use.useful_count / use.valuation_count
    assume(share >= config.neutral_usefulness)
    assert usefulness(use, NOW, config) == share


@given(configs(), uses(), st.floats(min_value=0.0, max_value=3650.0),
       st.floats(min_value=0.0, max_value=3650.0))
def test_a_negative_usefulness_moves_toward_neutral_as_time_passes(
        config: ScoringConfig, use: MemoryUse, earlier: float, later: float) -> None:
    assume(use.valuation_count >= config.min_valuations_for_signal)
    share = use.useful_count / use.valuation_count
    assume(share < config.neutral_usefulness)
    assert use.last_valued_at is not None
    earlier, later = sorted((earlier, later))
    at_earlier = usefulness(use, use.last_valued_at + timedelta(days=earlier), config)
    at_later = usefulness(use, use.last_valued_at + timedelta(days=later), config)
    assert share <= at_earlier <= at_later <= config.neutral_usefulness


@given(configs(), uses())
def test_rehabilitation_halves_the_distance_to_neutral_every_half_life(
        config: ScoringConfig, use: MemoryUse) -> None:
    assume(use.valuation_count >= config.min_valuations_for_signal)
    share = use.useful_count / use.valuation_count
    assume(share < config.neutral_usefulness)
    assert use.last_valued_at is not None
    half_life = timedelta(days=config.rehabilitation_half_life_days)
    for half_lives in (0, 1, 2):
        now = use.last_valued_at + half_lives * half_life
        distance = config.neutral_usefulness - usefulness(use, now, config)
        # timedelta keeps microseconds: the half-life is a microsecond off at most.
        assert math.isclose(distance, (config.neutral_usefulness - share) / 2**half_lives,
                            rel_tol=1e-6, abs_tol=1e-12)


def test_rehabilitation_counts_from_the_last_valuation() -> None:
    # 0 useful of 4: 0.5 - 0.5 * 0.5^(days / 90).
    assert usefulness(MemoryUse(0, 4, days_ago(0)), NOW, DEFAULTS) == 0.0
    assert usefulness(MemoryUse(0, 4, days_ago(90)), NOW, DEFAULTS) == 0.25
    assert usefulness(MemoryUse(0, 4, days_ago(180)), NOW, DEFAULTS) == 0.375
    # A fresh "not useful" resets the clock: the latest valuation is today.
    assert usefulness(MemoryUse(0, 5, days_ago(0)), NOW, DEFAULTS) == 0.0


def test_a_positive_usefulness_does_not_decay() -> None:
    assert usefulness(MemoryUse(3, 4, days_ago(900)), NOW, DEFAULTS) == 0.75


# Recency


@given(configs(), uses())
def test_recency_holds_its_floor_and_stays_at_most_one(config: ScoringConfig,
                                                       use: MemoryUse) -> None:
    assert config.recency_floor <= recency(use, NOW, config) <= 1.0


@given(configs(), uses())
def test_recency_halves_every_half_life_since_the_last_access(config: ScoringConfig,
                                                              use: MemoryUse) -> None:
    assume(use.last_accessed_at is not None)
    assert use.last_accessed_at is not None
    half_life = timedelta(days=config.recency_half_life_days)
    for half_lives in (0, 1, 2):
        now = use.last_accessed_at + half_lives * half_life
        assert math.isclose(recency(use, now, config),
                            max(config.recency_floor, 1 / 2**half_lives), rel_tol=1e-6)


def test_recency_by_days_since_the_last_access() -> None:
    # 0.5^(days / 30), at least 0.30; never accessed: the floor.
    assert recency(MemoryUse(access_count=1, last_accessed_at=days_ago(0)), NOW,
                   DEFAULTS) == 1.0
    assert recency(MemoryUse(access_count=1, last_accessed_at=days_ago(30)), NOW,
                   DEFAULTS) == 0.5
    assert recency(MemoryUse(access_count=1, last_accessed_at=days_ago(60)), NOW,
                   DEFAULTS) == 0.30  # 0.25 floored
    assert recency(MemoryUse(access_count=1, last_accessed_at=days_ago(-1)), NOW,
                   DEFAULTS) == 1.0  # an access "after now" is now
    assert recency(MemoryUse(), NOW, DEFAULTS) == 0.30


# Frequency


@given(configs(), uses())
def test_frequency_is_capped_at_one_and_reaches_it_at_the_cap(config: ScoringConfig,
                                                              use: MemoryUse) -> None:
    assert 0.0 <= frequency(use, config) <= 1.0
    if use.access_count >= config.frequency_log_cap:
        assert frequency(use, config) == 1.0


@given(configs(), st.integers(min_value=0, max_value=10_000),
       st.integers(min_value=0, max_value=10_000))
def test_frequency_grows_with_accesses(config: ScoringConfig, fewer: int, more: int) -> None:
    fewer, more = sorted((fewer, more))

    def accessed(times: int) -> MemoryUse:
        return MemoryUse(access_count=times, last_accessed_at=NOW if times else None)

    assert frequency(accessed(fewer), config) <= frequency(accessed(more), config)


def test_frequency_is_log_access_plus_one_over_log_fifty_one() -> None:
    assert frequency(MemoryUse(), DEFAULTS) == 0.0
    # ln(8) / ln(51) = 2.0794 / 3.9318 = 0.5289
    assert frequency(MemoryUse(access_count=7, last_accessed_at=NOW), DEFAULTS) == \
        pytest.approx(0.52887, abs=1e-5)
    assert frequency(MemoryUse(access_count=50, last_accessed_at=NOW), DEFAULTS) == 1.0
    assert frequency(MemoryUse(access_count=5000, last_accessed_at=NOW), DEFAULTS) == 1.0


# The adaptive score


@given(configs(), uses())
def test_the_hard_floor_holds_for_any_use(config: ScoringConfig, use: MemoryUse) -> None:
    score = adaptive_score(use, NOW, config)
    assert config.adaptive_score_floor <= score.score <= 1.0


@given(configs(), uses())
def test_the_score_is_the_weighted_sum_of_its_parts_unless_floored(config: ScoringConfig,
                                                                   use: MemoryUse) -> None:
    score = adaptive_score(use, NOW, config)
    assert score.usefulness == usefulness(use, NOW, config)
    assert score.recency == recency(use, NOW, config)
    assert score.frequency == frequency(use, config)
    weighted = (score.usefulness * config.blend_usefulness_weight
                + score.recency * config.blend_recency_weight
                + score.frequency * config.blend_frequency_weight)
    assert math.isclose(score.score, max(config.adaptive_score_floor, weighted), abs_tol=1e-9)


@given(st.integers(min_value=3, max_value=1000))
def test_any_number_of_not_useful_ratings_leaves_the_floor(ratings: int) -> None:
    use = MemoryUse(0, ratings, days_ago(0))
    assert adaptive_score(use, NOW, DEFAULTS).score >= 0.35


# The blend


@given(configs(), RAW, RAW, ADAPTIVE)
def test_the_blend_is_monotone_in_the_raw_score(config: ScoringConfig, low: float,
                                                high: float, adaptive: float) -> None:
    low, high = sorted((low, high))
    assert blended(low, adaptive, config) <= blended(high, adaptive, config)


@given(configs(), RAW, ADAPTIVE, ADAPTIVE)
def test_the_blend_is_monotone_in_the_adaptive_score(config: ScoringConfig, raw: float,
                                                     low: float, high: float) -> None:
    low, high = sorted((low, high))
    assert blended(raw, low, config) <= blended(raw, high, config)


@given(configs(), st.floats(min_value=1e-6, max_value=1e6), ADAPTIVE)
def test_the_blend_never_zeroes_a_raw_score(config: ScoringConfig, raw: float,
                                            adaptive: float) -> None:
    assert blended(raw, adaptive, config) > 0


@given(configs(), ranked_hits(), st.data())
def test_boost_zero_is_the_identity_on_rankings(config: ScoringConfig,
                                                hits: list[tuple[str, float]],
                                                data: st.DataObject) -> None:
    off = dataclasses.replace(config, blend_boost_factor=0.0)
    scores = {record_id: data.draw(ADAPTIVE) for record_id, _ in hits}
    assert [record_id for record_id, _ in rerank(hits, scores, off)] == \
        [record_id for record_id, _ in hits]


@given(configs(), ranked_hits(), ADAPTIVE)
def test_one_adaptive_score_for_every_hit_keeps_the_ranking(
        config: ScoringConfig, hits: list[tuple[str, float]], adaptive: float) -> None:
    # What "neutral" can mean for a ranking: hits that share an adaptive score (all neutral,
    # say) are all scaled by one factor and keep their order.
    reranked = rerank(hits, dict.fromkeys((record_id for record_id, _ in hits), adaptive),
                      config)
    assert [record_id for record_id, _ in reranked] == [record_id for record_id, _ in hits]


@given(configs(), ranked_hits(), st.data())
def test_rerank_orders_by_the_blended_score_keeping_ties_in_order(
        config: ScoringConfig, hits: list[tuple[str, float]], data: st.DataObject) -> None:
    scores = {record_id: data.draw(ADAPTIVE) for record_id, _ in hits}
    reranked = rerank(hits, scores, config)
    assert sorted(reranked) == sorted((record_id, blended(raw, scores[record_id], config))
                                      for record_id, raw in hits)
    position = {record_id: index for index, (record_id, _) in enumerate(hits)}
    for (first, first_score), (second, second_score) in itertools.pairwise(reranked):
        assert first_score > second_score or (first_score == second_score
                                              and position[first] < position[second])


def test_a_boost_raises_a_useful_memory_above_a_slightly_better_raw_hit() -> None:
    useful = adaptive_score(MemoryUse(10, 10, days_ago(1), 40, days_ago(1)), NOW, DEFAULTS)
    unrated = adaptive_score(MemoryUse(), NOW, DEFAULTS)
    reranked = rerank([("near_miss", 0.80), ("answer", 0.75)],
                      {"near_miss": unrated.score, "answer": useful.score}, DEFAULTS)
    assert [record_id for record_id, _ in reranked] == ["answer", "near_miss"]


def test_the_blend_and_rerank_refuse_what_they_cannot_scale() -> None:
    with pytest.raises(ValueError, match="raw score"):
        blended(-0.1, 0.5, DEFAULTS)
    with pytest.raises(ValueError, match="raw score"):
        blended(math.nan, 0.5, DEFAULTS)
    with pytest.raises(ValueError, match="adaptive score"):
        blended(0.5, 1.5, DEFAULTS)
    with pytest.raises(ValueError, match="no adaptive score for b"):
        rerank([("a", 1.0), ("b", 0.5)], {"a": 0.5}, DEFAULTS)


# Worked examples, by hand from the seed's formula and defaults


def test_worked_example_a_memory_mostly_useful() -> None:
    # 8 useful of 10 valuations (positive: no rehabilitation) -> usefulness 0.8
    # last access 30 days ago -> recency 0.5^(30/30) = 0.5
    # 20 accesses -> frequency ln(21)/ln(51) = 3.04452/3.93183 = 0.77433
    # adaptive = 0.60*0.8 + 0.25*0.5 + 0.15*0.77433 = 0.48 + 0.125 + 0.11615 = 0.72115
    # blended(0.9) = 0.9 * (0.70 + 0.30*0.72115) = 0.9 * 0.91634 = 0.82471
    score = adaptive_score(MemoryUse(8, 10, days_ago(10), 20, days_ago(30)), NOW, DEFAULTS)
    assert score.usefulness == 0.8
    assert score.recency == 0.5
    assert score.frequency == pytest.approx(0.77433, abs=1e-5)
    assert score.score == pytest.approx(0.72115, abs=1e-5)
    assert blended(0.9, score.score, DEFAULTS) == pytest.approx(0.82471, abs=1e-5)


def test_worked_example_a_memory_rated_useless_then_left_alone() -> None:
    # 0 useful of 4, last valued 90 days ago -> usefulness 0.5 - (0.5 - 0) * 0.5 = 0.25
    # never accessed -> recency 0.30 (the floor), frequency ln(1)/ln(51) = 0
    # weighted = 0.60*0.25 + 0.25*0.30 + 0.15*0 = 0.15 + 0.075 = 0.225 -> the floor, 0.35
    # blended(1.0) = 1.0 * (0.70 + 0.30*0.35) = 0.805
    score = adaptive_score(MemoryUse(0, 4, days_ago(90)), NOW, DEFAULTS)
    assert score == AdaptiveScore(score=0.35, usefulness=0.25, recency=0.30, frequency=0.0)
    assert blended(1.0, score.score, DEFAULTS) == pytest.approx(0.805)


def test_worked_example_two_bad_ratings_of_a_busy_memory() -> None:
    # 0 useful of 2: under 3 valuations -> usefulness 0.5 (neutral)
    # last access now -> recency 1.0; 50 accesses -> frequency ln(51)/ln(51) = 1.0
    # adaptive = 0.60*0.5 + 0.25*1.0 + 0.15*1.0 = 0.30 + 0.25 + 0.15 = 0.70
    score = adaptive_score(MemoryUse(0, 2, days_ago(0), 50, days_ago(0)), NOW, DEFAULTS)
    assert score.usefulness == 0.5
    assert score.score == pytest.approx(0.70)


def test_worked_example_a_neutral_adaptive_score_scales_raw_by_085() -> None:
    # The seed says a neutral adaptive score (0.5) "leaves the raw score unchanged"; its own
    # formula and defaults give 0.70 + 0.30*0.5 = 0.85 times the raw score. What holds is the
    # ranking: hits that share an adaptive score keep their order (tested above).
    assert blended(1.0, 0.5, DEFAULTS) == pytest.approx(0.85)
    assert blended(0.4, 0.5, DEFAULTS) == pytest.approx(0.34)


def test_worked_example_a_floor_of_half_does_not_make_every_memory_equal() -> None:
    # The seed says a floor of 0.5 makes "all memories score equally"; by its formula a floor
    # only lifts the low ones: a useful, fresh, busy memory is 0.60*1 + 0.25*1 + 0.15*1 = 1.0,
    # an unused one max(0.5, 0.60*0.5 + 0.25*0.30 + 0) = max(0.5, 0.375) = 0.5.
    half = dataclasses.replace(DEFAULTS, adaptive_score_floor=0.5)
    busy = MemoryUse(5, 5, days_ago(0), 50, days_ago(0))
    assert adaptive_score(busy, NOW, half).score == pytest.approx(1.0)
    assert adaptive_score(MemoryUse(), NOW, half).score == 0.5


def test_an_unused_memory_scores_0375() -> None:
    # 0.60*0.5 (neutral) + 0.25*0.30 (never accessed: the floor) + 0.15*0 = 0.375 > 0.35
    assert adaptive_score(MemoryUse(), NOW, DEFAULTS).score == pytest.approx(0.375)


# The config: validation and partial updates


@given(configs())
def test_every_config_drawn_in_range_is_valid(config: ScoringConfig) -> None:
    assert scoring_config_problems(config) == []


@pytest.mark.parametrize("field, value, reason", [
    ("min_valuations_for_signal", 0, "min_valuations_for_signal must be at least 1"),
    ("min_valuations_for_signal", 2.5, "min_valuations_for_signal must be an integer"),
    ("frequency_log_cap", 0, "frequency_log_cap must be at least 1"),
    ("frequency_log_cap", -5, "frequency_log_cap must be at least 1"),
    ("recency_half_life_days", 0, "recency_half_life_days must be more than 0"),
    ("recency_half_life_days", -30, "recency_half_life_days must be more than 0"),
    ("recency_half_life_days", math.inf, "recency_half_life_days must be finite"),
    ("rehabilitation_half_life_days", 0, "rehabilitation_half_life_days must be more than 0"),
    ("rehabilitation_half_life_days", math.nan, "rehabilitation_half_life_days must be finite"),
    ("adaptive_score_floor", -0.01, "adaptive_score_floor must be in [0, 1]"),
    ("adaptive_score_floor", 1.01, "adaptive_score_floor must be in [0, 1]"),
    ("recency_floor", 1.5, "recency_floor must be in [0, 1]"),
    ("neutral_usefulness", -0.5, "neutral_usefulness must be in [0, 1]"),
    ("blend_boost_factor", 1.2, "blend_boost_factor must be in [0, 1]"),
    ("blend_boost_factor", -0.1, "blend_boost_factor must be in [0, 1]"),
    ("blend_base_factor", 0.0, "blend_base_factor must be in (0, 1]"),
    ("blend_base_factor", 1.5, "blend_base_factor must be in (0, 1]"),
    ("blend_usefulness_weight", 0.7, "must sum to 1"),
    ("blend_recency_weight", 0.2, "must sum to 1"),
    ("blend_frequency_weight", 0.15 + 2e-9, "must sum to 1"),
    ("blend_frequency_weight", -0.15, "blend_frequency_weight must be in [0, 1]"),
    ("blend_boost_factor", "0.3", "blend_boost_factor must be a number"),
    ("blend_boost_factor", True, "blend_boost_factor must be a number"),
    ("blend_boost_factor", None, "blend_boost_factor must be a number"),
])
def test_config_validation_refuses_each_bad_value_saying_why(field: str, value: object,
                                                             reason: str) -> None:
    with pytest.raises(InvalidScoringConfig) as refused:
        ScoringConfig(**{field: value})  # type: ignore[arg-type]
    assert any(reason in problem for problem in refused.value.problems)
    assert reason in str(refused.value)


@given(configs(), st.floats(min_value=2e-9, max_value=1.0), st.booleans())
def test_weights_that_do_not_sum_to_one_are_refused(config: ScoringConfig, off_by: float,
                                                    over: bool) -> None:
    weight = config.blend_frequency_weight + (off_by if over else -off_by)
    assume(0 <= weight <= 1)
    with pytest.raises(InvalidScoringConfig, match="must sum to 1"):
        dataclasses.replace(config, blend_frequency_weight=weight)


def test_a_config_with_several_bad_values_names_each() -> None:
    with pytest.raises(InvalidScoringConfig) as refused:
        ScoringConfig(recency_half_life_days=0, adaptive_score_floor=2.0)
    assert len(refused.value.problems) == 2


def test_a_partial_update_changes_only_what_it_names() -> None:
    changed = updated_config(DEFAULTS, {"blend_boost_factor": 0, "recency_half_life_days": 7})
    assert changed == dataclasses.replace(DEFAULTS, blend_boost_factor=0.0,
                                          recency_half_life_days=7.0)
    assert DEFAULTS.blend_boost_factor == 0.30
    moved = updated_config(DEFAULTS, {"blend_usefulness_weight": 0.5,
                                      "blend_frequency_weight": 0.25})
    assert moved.blend_recency_weight == 0.25


def test_a_partial_update_is_validated_as_a_whole() -> None:
    with pytest.raises(InvalidScoringConfig, match="must sum to 1"):
        updated_config(DEFAULTS, {"blend_usefulness_weight": 0.5})
    with pytest.raises(InvalidScoringConfig, match="blend_boost is not a scoring parameter"):
        updated_config(DEFAULTS, {"blend_boost": 0.0})
    with pytest.raises(InvalidScoringConfig, match="frequency_log_cap must be an integer"):
        updated_config(DEFAULTS, {"frequency_log_cap": 50.0})


# What one agent did with one memory


@pytest.mark.parametrize("use, reason", [
    ({"useful_count": 3, "valuation_count": 2, "last_valued_at": NOW}, "useful_count 3"),
    ({"useful_count": -1, "valuation_count": 2, "last_valued_at": NOW}, "useful_count -1"),
    ({"access_count": -1}, "access_count -1"),
    ({"useful_count": 1, "valuation_count": 1}, "last_valued_at is given exactly"),
    ({"last_valued_at": NOW}, "last_valued_at is given exactly"),
    ({"access_count": 4}, "last_accessed_at is given exactly"),
    ({"access_count": 1, "last_accessed_at": datetime(2025, 6, 1)},
     "last_accessed_at must carry a UTC offset"),
])
def test_a_memory_use_that_cannot_be_refuses_itself(use: dict[str, object],
                                                    reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        MemoryUse(**use)  # type: ignore[arg-type]
