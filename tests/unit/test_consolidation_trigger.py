from datetime import UTC, date, datetime, timedelta

import pytest

from memstream_client.ids import consolidate_request_id
from processors.consolidation.trigger import TriggerRules, request_basis, skip_reason, window_start

TODAY = date(2026, 11, 21)
RULES = TriggerRules()


def test_nine_new_memories_are_not_enough_and_the_tenth_is() -> None:
    assert skip_reason(reports_today=0, new_since_report=9, rules=RULES) == \
        "too_few_new_memories"
    assert skip_reason(reports_today=0, new_since_report=10, rules=RULES) is None


def test_a_report_today_stops_a_counted_request_unless_several_a_day_are_allowed() -> None:
    assert skip_reason(reports_today=1, new_since_report=50, rules=RULES) == "report_today"
    several = TriggerRules(once_per_day=False)
    assert skip_reason(reports_today=3, new_since_report=10, rules=several) is None
    assert skip_reason(reports_today=3, new_since_report=9, rules=several) == \
        "too_few_new_memories"


def test_one_request_a_day_or_one_per_report() -> None:
    assert request_basis(TODAY, "cns_a", RULES) == request_basis(TODAY, "cns_b", RULES) \
        == "day:2026-11-21"
    assert request_basis(TODAY + timedelta(days=1), None, RULES) == "day:2026-11-22"
    several = TriggerRules(once_per_day=False)
    assert request_basis(TODAY, None, several) == "after:-"
    assert request_basis(TODAY, "cns_a", several) != request_basis(TODAY, "cns_b", several)


def test_a_request_is_named_by_its_namespace_and_basis() -> None:
    assert consolidate_request_id("a", "day:2026-11-21") == \
        consolidate_request_id("a", "day:2026-11-21")
    assert len({consolidate_request_id("a", "day:2026-11-21"),
                consolidate_request_id("a", "day:2026-11-22"),
                consolidate_request_id("b", "day:2026-11-21")}) == 3


def test_tumbling_windows_are_aligned_on_the_epoch() -> None:
    half_hour = timedelta(minutes=30)
    moment = datetime(2026, 11, 21, 10, 47, 13, tzinfo=UTC)
    assert window_start(moment, half_hour) == datetime(2026, 11, 21, 10, 30, tzinfo=UTC)
    assert window_start(datetime(2026, 11, 21, 10, 30, tzinfo=UTC), half_hour) == \
        datetime(2026, 11, 21, 10, 30, tzinfo=UTC)
    odd = window_start(moment, timedelta(minutes=7))
    assert odd.timestamp() % 420 == 0 and timedelta(0) <= moment - odd < timedelta(minutes=7)


def test_the_rules_refuse_what_cannot_work() -> None:
    with pytest.raises(ValueError):
        TriggerRules(min_new_memories=0)
    with pytest.raises(ValueError):
        TriggerRules(window=timedelta(0))
    with pytest.raises(ValueError):
        TriggerRules(window=timedelta(hours=2), keep_windows_for=timedelta(hours=1))
