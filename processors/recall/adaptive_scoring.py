"""Adaptive memory scores (seed 003): what agents' use of a memory says about it, blended
into the raw score of a search hit.

Per (agent, memory):

    adaptive  = max(floor, usefulness * w_usefulness + recency * w_recency
                           + frequency * w_frequency)
    blended   = raw * (base_factor + boost_factor * adaptive)

- usefulness = useful / valuations; the neutral 0.5 below `min_valuations_for_signal`
  valuations; a negative one (under neutral) fades back toward neutral, halving its distance
  every `rehabilitation_half_life_days` since the last valuation;
- recency = 0.5 ** (days since the last access / `recency_half_life_days`), at least
  `recency_floor`; a memory never accessed has the floor;
- frequency = log(accesses + 1) / log(`frequency_log_cap` + 1), at most 1.

The seed states the recency floor (0.30) and the neutral usefulness (0.5) in its prose, not in
its parameter table; they are parameters here too, so that every number of the formula is one.
Nothing here reads a clock or a store: the caller gives `now` and the counts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from datetime import datetime

# How far the three weights may sum from 1: room for decimal fractions written in binary.
WEIGHT_SUM_TOLERANCE = 1e-9
_SECONDS_PER_DAY = 86_400.0


class InvalidScoringConfig(ValueError):
    """A scoring config refused; `problems` says why, one reason per refused value."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = tuple(problems)


@dataclass(frozen=True)
class ScoringConfig:
    """Every parameter of seed 003's scoring, with its defaults. Refuses itself when invalid
    (`scoring_config_problems`), so that a config in hand is one the formula can use."""

    min_valuations_for_signal: int = 3
    recency_half_life_days: float = 30.0
    rehabilitation_half_life_days: float = 90.0
    adaptive_score_floor: float = 0.35
    frequency_log_cap: int = 50
    blend_usefulness_weight: float = 0.60
    blend_recency_weight: float = 0.25
    blend_frequency_weight: float = 0.15
    blend_base_factor: float = 0.70
    blend_boost_factor: float = 0.30
    neutral_usefulness: float = 0.5
    recency_floor: float = 0.30

    def __post_init__(self) -> None:
        problems = scoring_config_problems(self)
        if problems:
            raise InvalidScoringConfig(problems)


_INTEGER_FIELDS = frozenset({"min_valuations_for_signal", "frequency_log_cap"})
_FIELD_NAMES = tuple(field.name for field in fields(ScoringConfig))


def scoring_config_problems(config: ScoringConfig) -> list[str]:
    """Why each refused value of `config` is refused; empty when the config is valid.

    Ranges are written as `not (low <= value <= high)` so that NaN is refused too."""
    problems: list[str] = []
    for name in _FIELD_NAMES:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            problems.append(f"{name} must be a number (got {value!r})")
        elif name in _INTEGER_FIELDS and not isinstance(value, int):
            problems.append(f"{name} must be an integer (got {value!r})")
        elif not math.isfinite(value):
            problems.append(f"{name} must be finite (got {value!r})")
    if problems:
        return problems

    def at_least(name: str, low: int) -> None:
        if not getattr(config, name) >= low:
            problems.append(f"{name} must be at least {low} (got {getattr(config, name)!r})")

    def positive(name: str) -> None:
        if not getattr(config, name) > 0:
            problems.append(f"{name} must be more than 0 (got {getattr(config, name)!r})")

    def fraction(name: str) -> None:
        if not 0 <= getattr(config, name) <= 1:
            problems.append(f"{name} must be in [0, 1] (got {getattr(config, name)!r})")

    # With 0, a memory never valued would divide 0 by 0.
    at_least("min_valuations_for_signal", 1)
    positive("recency_half_life_days")
    positive("rehabilitation_half_life_days")
    # log(cap + 1) normalizes the frequency: a cap under 1 would leave nothing to reach.
    at_least("frequency_log_cap", 1)
    for name in ("adaptive_score_floor", "recency_floor", "neutral_usefulness",
                 "blend_usefulness_weight", "blend_recency_weight", "blend_frequency_weight",
                 "blend_boost_factor"):
        fraction(name)
    # A zero base would let a low adaptive score zero a raw score out; the seed's blend
    # depresses a memory rated not useful but never zeroes it.
    if not 0 < config.blend_base_factor <= 1:
        problems.append(f"blend_base_factor must be in (0, 1] (got {config.blend_base_factor!r})")
    weights = (config.blend_usefulness_weight + config.blend_recency_weight
               + config.blend_frequency_weight)
    if not abs(weights - 1.0) <= WEIGHT_SUM_TOLERANCE:
        problems.append("blend_usefulness_weight + blend_recency_weight + "
                        f"blend_frequency_weight must sum to 1 (got {weights!r})")
    return problems


def updated_config(config: ScoringConfig, changes: Mapping[str, object]) -> ScoringConfig:
    """`config` with `changes` (field name → new value) applied, validated as a whole: an
    unknown name, a value that is not a number, or any value the result refuses raises
    `InvalidScoringConfig` with every reason at once."""
    unknown = sorted(set(changes) - set(_FIELD_NAMES))
    if unknown:
        raise InvalidScoringConfig([f"{name} is not a scoring parameter" for name in unknown])
    return ScoringConfig(**{**asdict(config), **changes})


@dataclass(frozen=True)
class MemoryUse:
    """What one agent did with one memory: how many of its valuations said useful, and when it
    last valued it (rehabilitation counts from then); how often it was retrieved, and when
    last. The defaults are a memory never valued nor retrieved."""

    useful_count: int = 0
    valuation_count: int = 0
    last_valued_at: datetime | None = None
    access_count: int = 0
    last_accessed_at: datetime | None = None

    def __post_init__(self) -> None:
        problems: list[str] = []
        if not 0 <= self.useful_count <= self.valuation_count:
            problems.append(f"useful_count {self.useful_count} must be in "
                            f"[0, valuation_count {self.valuation_count}]")
        if self.access_count < 0:
            problems.append(f"access_count {self.access_count} must be at least 0")
        if (self.valuation_count > 0) != (self.last_valued_at is not None):
            problems.append("last_valued_at is given exactly when valuation_count > 0")
        if (self.access_count > 0) != (self.last_accessed_at is not None):
            problems.append("last_accessed_at is given exactly when access_count > 0")
        for name in ("last_valued_at", "last_accessed_at"):
            moment = getattr(self, name)
            if moment is not None and moment.utcoffset() is None:
                problems.append(f"{name} must carry a UTC offset")
        if problems:
            raise ValueError("; ".join(problems))


@dataclass(frozen=True)
class AdaptiveScore:
    """A memory's adaptive score and the three parts it is made of (for `explain`)."""

    score: float
    usefulness: float
    recency: float
    frequency: float


def _days_since(moment: datetime, now: datetime) -> float:
    # A moment after `now` (clocks of two workers) counts as now, not as a negative age.
    return max(0.0, (now - moment).total_seconds() / _SECONDS_PER_DAY)


def usefulness(use: MemoryUse, now: datetime, config: ScoringConfig) -> float:
    """useful / valuations; neutral below `min_valuations_for_signal` valuations; a negative
    one halves its distance to neutral every `rehabilitation_half_life_days` since the last
    valuation."""
    if use.valuation_count < config.min_valuations_for_signal or use.last_valued_at is None:
        return config.neutral_usefulness
    share = use.useful_count / use.valuation_count
    if share >= config.neutral_usefulness:
        return share
    remaining = math.pow(0.5, _days_since(use.last_valued_at, now)
                         / config.rehabilitation_half_life_days)
    # Written from the share up, and capped, so that rounding never puts it outside
    # [share, neutral].
    recovered = share + (config.neutral_usefulness - share) * (1.0 - remaining)
    return min(config.neutral_usefulness, recovered)


def recency(use: MemoryUse, now: datetime, config: ScoringConfig) -> float:
    """Halves every `recency_half_life_days` since the last access, at least
    `recency_floor`; a memory never accessed has the floor."""
    if use.last_accessed_at is None:
        return config.recency_floor
    decayed = math.pow(0.5, _days_since(use.last_accessed_at, now)
                       / config.recency_half_life_days)
    return max(config.recency_floor, decayed)


def frequency(use: MemoryUse, config: ScoringConfig) -> float:
    """log(accesses + 1) normalized so that `frequency_log_cap` accesses (or more) give 1
    (the log's base cancels out)."""
    return min(1.0, math.log(use.access_count + 1) / math.log(config.frequency_log_cap + 1))


def adaptive_score(use: MemoryUse, now: datetime, config: ScoringConfig) -> AdaptiveScore:
    """The weighted sum of the three parts, at least `adaptive_score_floor`."""
    parts = (usefulness(use, now, config), recency(use, now, config), frequency(use, config))
    weighted = (parts[0] * config.blend_usefulness_weight
                + parts[1] * config.blend_recency_weight
                + parts[2] * config.blend_frequency_weight)
    # The weights may sum to 1 + WEIGHT_SUM_TOLERANCE: an adaptive score stays within [0, 1].
    score = max(config.adaptive_score_floor, min(1.0, weighted))
    return AdaptiveScore(score, *parts)


def blend_factor(adaptive: float, config: ScoringConfig) -> float:
    """What a raw score is multiplied by: blend_base_factor + blend_boost_factor * adaptive."""
    if not 0 <= adaptive <= 1:
        raise ValueError(f"an adaptive score is in [0, 1] (got {adaptive!r})")
    return config.blend_base_factor + config.blend_boost_factor * adaptive


def blended(raw: float, adaptive: float, config: ScoringConfig) -> float:
    """raw * (blend_base_factor + blend_boost_factor * adaptive)."""
    if not (math.isfinite(raw) and raw >= 0):
        # A good adaptive score would push a negative raw score further down.
        raise ValueError(f"a raw score to blend must be finite and at least 0 (got {raw!r})")
    return raw * blend_factor(adaptive, config)


def rerank(hits: Sequence[tuple[str, float]], scores: Mapping[str, float],
           config: ScoringConfig) -> list[tuple[str, float]]:
    """The hits ((id, raw score), best first) with their blended scores, best first; hits
    whose blended scores tie keep their order. `scores` holds the adaptive score of every
    hit (a memory nobody used has `adaptive_score(MemoryUse(), ...)`)."""
    missing = [record_id for record_id, _ in hits if record_id not in scores]
    if missing:
        raise ValueError(f"no adaptive score for {', '.join(missing)}")
    rescored = [(record_id, blended(raw, scores[record_id], config)) for record_id, raw in hits]
    # sorted() is stable: equal blended scores keep the search's order.
    return sorted(rescored, key=lambda hit: -hit[1])
