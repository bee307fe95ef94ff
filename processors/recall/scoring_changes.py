"""The adaptive scoring's config as people see and change it (`memory.scoring`,
docs/retrieval.md#adaptive-scores-seed-003): each parameter described with its default and
the range `processors.recall.adaptive_scoring.scoring_config_problems` holds it to, so that a form
can show them, and a change applied to the version it was made on.

The ranges here describe the validation; they do not replace it: a config is valid when
`ScoringConfig` takes it, and tests/unit/test_scoring_changes.py checks every range against
it at its bounds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields

from processors.events.errors import DeadLetterReason, Rejected
from processors.recall.adaptive_scoring import (
    WEIGHT_SUM_TOLERANCE,
    InvalidScoringConfig,
    ScoringConfig,
    updated_config,
)

DEFAULTS = ScoringConfig()
NAMES = frozenset(field.name for field in fields(ScoringConfig))
WEIGHTS = ("blend_usefulness_weight", "blend_recency_weight", "blend_frequency_weight")


@dataclass(frozen=True)
class Parameter:
    """One parameter of the scoring: its range is [minimum, maximum] (no maximum: none), the
    minimum left out when `exclusive_minimum`."""

    name: str
    description: str
    integer: bool
    minimum: float
    maximum: float | None
    exclusive_minimum: bool = False

    @property
    def default(self) -> int | float:
        value: int | float = getattr(DEFAULTS, self.name)
        return value

    @property
    def valid(self) -> str:
        """The range in words: `an integer ≥ 1`, `> 0`, `[0, 1]`, `(0, 1]`."""
        if self.maximum is None:
            bound = f"{'>' if self.exclusive_minimum else '≥'} {self.minimum:g}"
            return f"an integer {bound}" if self.integer else bound
        opening = "(" if self.exclusive_minimum else "["
        return f"{opening}{self.minimum:g}, {self.maximum:g}]"


def _fraction(name: str, description: str) -> Parameter:
    return Parameter(name, description, integer=False, minimum=0, maximum=1)


PARAMETERS: tuple[Parameter, ...] = (
    Parameter("min_valuations_for_signal", "Ratings of a memory by an agent before they move "
              "its usefulness; under it the usefulness is neutral.", integer=True, minimum=1,
              maximum=None),
    Parameter("recency_half_life_days", "Days after which the recency of a memory not "
              "accessed since halves.", integer=False, minimum=0, maximum=None,
              exclusive_minimum=True),
    Parameter("rehabilitation_half_life_days", "Days after which a usefulness under neutral "
              "halves its distance back to neutral, counted from the last rating.",
              integer=False, minimum=0, maximum=None, exclusive_minimum=True),
    _fraction("adaptive_score_floor", "The least adaptive score any memory has, however it "
              "was rated."),
    Parameter("frequency_log_cap", "Accesses at which the frequency part reaches 1.",
              integer=True, minimum=1, maximum=None),
    _fraction("blend_usefulness_weight", "Weight of usefulness in the adaptive score."),
    _fraction("blend_recency_weight", "Weight of recency in the adaptive score."),
    _fraction("blend_frequency_weight", "Weight of access frequency in the adaptive score."),
    Parameter("blend_base_factor", "Share of the raw score a hit keeps whatever its adaptive "
              "score.", integer=False, minimum=0, maximum=1, exclusive_minimum=True),
    _fraction("blend_boost_factor", "Share of the raw score the adaptive score adds; 0 ranks "
              "as without scoring."),
    _fraction("neutral_usefulness", "The usefulness of a memory with too few ratings."),
    _fraction("recency_floor", "The least recency of a memory, accessed long ago or never."),
)
# What holds between parameters, beside each one's range.
CONSTRAINTS: tuple[str, ...] = (
    f"{' + '.join(WEIGHTS)} = 1 (within {WEIGHT_SUM_TOLERANCE:g})",
)


def parameters_view(config: ScoringConfig) -> list[dict[str, object]]:
    """Each parameter as a form shows it: its value in `config`, its default and range."""
    return [{"name": parameter.name, "value": getattr(config, parameter.name),
             "default": parameter.default,
             "type": "integer" if parameter.integer else "number",
             "minimum": parameter.minimum, "exclusive_minimum": parameter.exclusive_minimum,
             "maximum": parameter.maximum, "valid": parameter.valid,
             "description": parameter.description} for parameter in PARAMETERS]


class RefusedScoringChange(Rejected):
    """A scoring change refused, with every reason (`problems`)."""

    def __init__(self, reason: DeadLetterReason, problems: Sequence[str]) -> None:
        super().__init__(reason, "; ".join(problems))
        self.problems = tuple(problems)


def changed_config(version: int, config: ScoringConfig, changes: Mapping[str, object],
                   expected_version: int | None) -> ScoringConfig:
    """`config` (the namespace's `version`) with `changes` applied; raises
    `RefusedScoringChange`: `stale_version` if the change was made on another version,
    `invalid_event` with every reason the result's validation gives."""
    if expected_version is not None and expected_version != version:
        raise RefusedScoringChange("stale_version", [
            f"the change was made on version {expected_version}; the config is at version "
            f"{version}"])
    # updated_config judges the names before the values: asked about the unknown names and
    # the known ones apart, it gives every reason at once.
    known = {name: value for name, value in changes.items() if name in NAMES}
    unknown = {name: value for name, value in changes.items() if name not in NAMES}
    problems: list[str] = []
    changed = config
    for part in (unknown, known):
        try:
            changed = updated_config(config, part)
        except InvalidScoringConfig as refused:
            problems += refused.problems
    if problems:
        raise RefusedScoringChange("invalid_event", problems)
    return changed

