"""How long each kind of record lives."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from processors.memory.retention import DEFAULT_RETENTION, RetentionRules, parse_retention

NOW = datetime(2026, 11, 23, tzinfo=UTC)


def test_by_default_digests_live_two_years_and_the_rest_until_their_expires_at() -> None:
    assert RetentionRules().cutoffs(NOW) == {"run_digest": NOW - timedelta(days=730)}
    assert parse_retention("") == RetentionRules(DEFAULT_RETENTION)


def test_each_kind_is_configurable_and_never_keeps_forever() -> None:
    rules = parse_retention("memory=90, run_digest=never,fix_pattern=0.5")
    assert rules.cutoffs(NOW) == {"memory": NOW - timedelta(days=90),
                                  "fix_pattern": NOW - timedelta(hours=12)}


@pytest.mark.parametrize("raw, words", [
    ("memories=90", "unknown record kind 'memories'"),
    ("memory=soon", "expected days or never"),
    ("memory=-1", "must not be negative"),
])
def test_a_bad_setting_says_what_is_wrong(raw: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_retention(raw)
