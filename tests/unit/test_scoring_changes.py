"""The scoring config as people change it: the `memory.scoring` event as intake checks it
(memstream_client/events.py), each parameter's described range against the validation
(processors/recall/adaptive_scoring.py) at its bounds, and a change applied to the version it was
made on (processors/recall/scoring_changes.py). The stage, the routes and two workers on the real
stack: tests/integration/test_scoring_config.py."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from memstream_client.answers.scoring import ScoringParameter
from memstream_client.cli.commands import scoring_change_of
from memstream_client.cli.errors import CliError
from memstream_client.events import MEMORY_EVENT_TYPES, MemoryScoring
from processors.events.errors import Rejected
from processors.events.intake import parse_event
from processors.recall.adaptive_scoring import InvalidScoringConfig, ScoringConfig, updated_config
from processors.recall.scoring_changes import (
    CONSTRAINTS,
    PARAMETERS,
    Parameter,
    RefusedScoringChange,
    changed_config,
    parameters_view,
)

NOW = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
MAX_BYTES = 1 << 20
DEFAULTS = ScoringConfig()


def raw(payload: dict[str, Any]) -> bytes:
    return json.dumps({"event_id": "e1", "type": "memory.scoring", "namespace": "team-a",
                       "occurred_at": NOW.isoformat(), "producer": "test",
                       "payload": payload}).encode()


def test_a_change_names_numbers_by_parameter_and_its_author() -> None:
    parsed = parse_event(raw({"changes": {"min_valuations_for_signal": 5,
                                          "blend_boost_factor": 0.2},
                              "changed_by": "key:0123456789ab", "expected_version": 0}),
                         MEMORY_EVENT_TYPES, MAX_BYTES)
    assert isinstance(parsed.event, MemoryScoring)
    changes = parsed.event.payload.changes
    assert changes == {"min_valuations_for_signal": 5, "blend_boost_factor": 0.2}
    # An integer stays one: min_valuations_for_signal must be an integer.
    assert type(changes["min_valuations_for_signal"]) is int
    assert parsed.event.payload.expected_version == 0


@pytest.mark.parametrize(("payload", "says"), [
    ({"changes": {}, "changed_by": "ann"}, "at least 1 item"),
    ({"changes": {"blend_boost_factor": "0.2"}, "changed_by": "ann"},
     "changes.blend_boost_factor: Value error, must be a number (got str)"),
    ({"changes": {"blend_boost_factor": True}, "changed_by": "ann"},
     "must be a number (got bool)"),
    ({"changes": {"blend_boost_factor": None}, "changed_by": "ann"},
     "must be a number (got NoneType)"),
    ({"changes": {"Blend Boost": 0.2}, "changed_by": "ann"}, "should match pattern"),
    ({"changes": {f"p{n}": 1 for n in range(21)}, "changed_by": "ann"}, "at most 20 items"),
    ({"changes": {"blend_boost_factor": 0.2}}, "changed_by: Field required"),
    ({"changes": {"blend_boost_factor": 0.2}, "changed_by": "ann", "expected_version": -1},
     "greater than or equal to 0"),
])
def test_a_malformed_change_is_an_invalid_event(payload: dict[str, Any], says: str) -> None:
    with pytest.raises(Rejected) as rejected:
        parse_event(raw(payload), MEMORY_EVENT_TYPES, MAX_BYTES)
    assert rejected.value.reason == "invalid_event"
    assert says in rejected.value.detail


def test_every_parameter_of_the_config_is_described_once_in_its_order() -> None:
    assert [p.name for p in PARAMETERS] == [f.name for f in dataclasses.fields(ScoringConfig)]
    shown = parameters_view(dataclasses.replace(DEFAULTS, blend_boost_factor=0.1))
    boost = next(p for p in shown if p["name"] == "blend_boost_factor")
    assert (boost["value"], boost["default"], boost["valid"]) == (0.1, 0.30, "[0, 1]")
    assert [p["valid"] for p in shown if p["type"] == "integer"] == ["an integer ≥ 1"] * 2
    assert next(p for p in shown if p["name"] == "blend_base_factor")["valid"] == "(0, 1]"
    assert next(p for p in shown if p["name"] == "recency_half_life_days")["valid"] == "> 0"
    assert CONSTRAINTS == ("blend_usefulness_weight + blend_recency_weight + "
                           "blend_frequency_weight = 1 (within 1e-09)",)


def test_the_parameters_are_answered_as_described_an_integer_bound_as_one() -> None:
    shown = parameters_view(DEFAULTS)
    answered = [json.loads(ScoringParameter.model_validate(p).rendered()) for p in shown]
    assert answered == shown
    frequency = next(p for p in answered if p["name"] == "frequency_log_cap")
    assert (type(frequency["minimum"]), type(frequency["value"])) == (int, int)


def own_problems(parameter: Parameter, value: float) -> list[str]:
    """What the validation says of `value` for this parameter alone (a weight moved alone
    also breaks the weights' sum, which is another rule)."""
    try:
        updated_config(DEFAULTS, {parameter.name: value})
    except InvalidScoringConfig as refused:
        return [p for p in refused.problems if p.startswith(f"{parameter.name} must")]
    return []


@pytest.mark.parametrize("parameter", PARAMETERS, ids=lambda p: p.name)
def test_each_described_range_is_the_one_the_validation_holds(parameter: Parameter) -> None:
    step = 1 if parameter.integer else 1e-6
    low = parameter.minimum
    assert bool(own_problems(parameter, low)) == parameter.exclusive_minimum
    if parameter.exclusive_minimum:
        assert own_problems(parameter, low + step) == []
    assert own_problems(parameter, low - step), "under the minimum"
    if parameter.maximum is None:
        assert own_problems(parameter, 1e9 if not parameter.integer else 10**9) == []
    else:
        assert own_problems(parameter, parameter.maximum) == []
        assert own_problems(parameter, parameter.maximum + step), "over the maximum"
    if parameter.integer:
        assert own_problems(parameter, low + 0.5) == [
            f"{parameter.name} must be an integer (got {low + 0.5!r})"]
    # The default is in its own range.
    assert own_problems(parameter, parameter.default) == []


def test_a_change_applies_to_the_version_it_was_made_on() -> None:
    changes = {"blend_usefulness_weight": 0.5, "blend_recency_weight": 0.35}
    changed = changed_config(3, DEFAULTS, changes, expected_version=3)
    assert (changed.blend_usefulness_weight, changed.blend_recency_weight,
            changed.blend_frequency_weight) == (0.5, 0.35, 0.15)
    # No expected version: the change applies to whichever is the newest.
    assert changed_config(7, DEFAULTS, changes, expected_version=None) == changed
    with pytest.raises(RefusedScoringChange) as stale:
        changed_config(4, DEFAULTS, changes, expected_version=3)
    assert stale.value.reason == "stale_version"
    assert stale.value.problems == (
        "the change was made on version 3; the config is at version 4",)


def test_a_refused_change_gives_every_reason_at_once() -> None:
    with pytest.raises(RefusedScoringChange) as refused:
        changed_config(0, DEFAULTS, {"blend_usefulness_weight": 0.9, "recency_floor": 2,
                                     "boost": 1, "frequency_log_cap": "50"}, None)
    assert refused.value.reason == "invalid_event"
    # A value that is no number is judged first: the ranges need numbers.
    assert refused.value.problems == ("boost is not a scoring parameter",
                                      "frequency_log_cap must be a number (got '50')")
    with pytest.raises(RefusedScoringChange) as refused:
        changed_config(0, DEFAULTS, {"blend_usefulness_weight": 0.9, "recency_floor": 2,
                                     "boost": 1}, None)
    assert refused.value.problems == (
        "boost is not a scoring parameter",
        "recency_floor must be in [0, 1] (got 2)",
        "blend_usefulness_weight + blend_recency_weight + blend_frequency_weight must sum to 1 "
        "(got 1.2999999999999998)")
    assert refused.value.detail == "; ".join(refused.value.problems)


@pytest.mark.parametrize(("argument", "change"), [
    ("blend_boost_factor=0.2", ("blend_boost_factor", 0.2)),
    ("min_valuations_for_signal=5", ("min_valuations_for_signal", 5)),
    ("recency_half_life_days=1e2", ("recency_half_life_days", 100.0)),
    ("frequency_log_cap=-3", ("frequency_log_cap", -3)),
])
def test_the_cli_reads_name_equals_number(argument: str, change: tuple[str, float]) -> None:
    name, number = scoring_change_of(argument)
    assert (name, number) == change and type(number) is type(change[1])


@pytest.mark.parametrize("argument", ["blend_boost_factor", "=0.2", "blend_boost_factor=",
                                      "blend_boost_factor=high", "recency_floor=nan",
                                      "recency_floor=inf"])
def test_the_cli_refuses_what_is_not_name_equals_number(argument: str) -> None:
    with pytest.raises(CliError, match="NAME=NUMBER"):
        scoring_change_of(argument)
