"""Memory as of a moment: the version current then, and whether the record was in force."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from processors.memory.lifecycle import RecordVersion
from processors.recall.as_of import LEAVING_CHANGES, in_force_at, standing_at, version_at

T0 = datetime(2026, 11, 1, tzinfo=UTC)
CHANGES = ["created", "updated", "approved", "deprecated", "restored", "promoted",
           "superseded", "expired", "invalidated"]


def version(number: int, change: str, minutes: int) -> RecordVersion:
    return RecordVersion("mem_1", number, f"text {number}", {}, {}, change, "tests", "e",
                         T0 + timedelta(minutes=minutes))


HISTORY = [version(1, "created", 0), version(2, "updated", 10), version(3, "invalidated", 20),
           version(4, "restored", 30)]


def test_a_record_stands_as_its_latest_version_made_by_then() -> None:
    assert standing_at(HISTORY, T0 - timedelta(seconds=1)) == "not_recorded"
    assert version_at(HISTORY, T0 + timedelta(minutes=5)) == HISTORY[0]
    assert in_force_at(HISTORY, T0 + timedelta(minutes=10)) == HISTORY[1]
    # Invalidated from its invalidation until a restore brought it back.
    assert standing_at(HISTORY, T0 + timedelta(minutes=25)) == "invalidated"
    assert in_force_at(HISTORY, T0 + timedelta(minutes=25)) is None
    assert in_force_at(HISTORY, T0 + timedelta(minutes=31)) == HISTORY[3]


def test_versions_made_in_one_transaction_are_told_apart_by_their_number() -> None:
    same_moment = [version(1, "created", 0), version(2, "approved", 5),
                   version(3, "promoted", 5)]
    assert version_at(same_moment, T0 + timedelta(minutes=5)) == same_moment[2]


@given(changes=st.lists(st.sampled_from(CHANGES), min_size=1, max_size=8),
       gaps=st.lists(st.integers(0, 30), min_size=8, max_size=8),
       asked=st.integers(-10, 300))
def test_as_of_picks_the_latest_version_made_by_then_whatever_their_order(
        changes: list[str], gaps: list[int], asked: int) -> None:
    minutes, history = 0, []
    for number, change in enumerate(changes, 1):
        minutes += gaps[number - 1]
        history.append(version(number, change, minutes))
    moment = T0 + timedelta(minutes=asked)
    then = version_at(list(reversed(history)), moment)
    made = [v for v in history if v.changed_at <= moment]
    assert then == (made[-1] if made else None)
    standing = standing_at(history, moment)
    if then is None:
        assert standing == "not_recorded"
    elif then.change in LEAVING_CHANGES:
        assert standing == then.change and in_force_at(history, moment) is None
    else:
        assert standing == "in_force" and in_force_at(history, moment) == then
