"""The rules of gaps (processors/recall/gaps.py): when a recall met one (not under a filter),
which row counts it, which group it joins at write, what it keeps of its text; and how a
batch of sightings is counted by row (stores/recall/gaps.py). Grouping by embedding and resolution
on the real stack: tests/integration/test_gaps.py; the grouping threshold's measurement:
bench/gap_grouping.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from processors.recall.gaps import gap_key, kept_text, narrows, terms_key, unanswered
from stores.recall.gaps import GapSighting, counted

FLOOR = 0.5
T0 = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
TOKEN = "ghp_" + "a1b2c3d4e5" * 4


QUESTION = {"namespace", "query", "min_score", "limit", "profile", "agent_id", "run_id"}


@pytest.mark.parametrize(("query", "min_score", "shown", "gap"), [
    ("how do I rotate the signing keys", 0.5, 0, True),
    # Looked further down than the floor and still found nothing.
    ("how do I rotate the signing keys", 0.2, 0, True),
    ("how do I rotate the signing keys", 0.5, 1, False),
    # Weak hits under a lowered floor: the recall was given something.
    ("how do I rotate the signing keys", 0.2, 3, False),
    # Stricter than the floor: an empty answer does not say nothing reaches the floor.
    ("how do I rotate the signing keys", 0.8, 0, False),
    # No question: a search by related ids alone, a wake without a task.
    ("", 0.5, 0, False),
    ("   ", 0.5, 0, False),
])
def test_a_recall_met_a_gap_when_it_asked_and_showed_nothing_down_to_the_floor(
        query: str, min_score: float, shown: int, gap: bool) -> None:
    assert unanswered(query, min_score, shown, FLOOR, narrows(QUESTION)) is gap


@pytest.mark.parametrize("narrowing", ["kind", "memory_type", "tag", "tier", "review_state",
                                       "related_id", "since", "until"])
def test_a_recall_narrowed_by_a_filter_meets_no_gap(narrowing: str) -> None:
    """An empty answer may be the filter's: the gap would be asked again without it."""
    assert narrows(QUESTION | {narrowing})
    assert not unanswered("how do I rotate the signing keys", 0.5, 0, FLOOR,
                          narrows(QUESTION | {narrowing}))


def test_the_same_words_in_other_case_or_spacing_are_one_row() -> None:
    assert gap_key("How to renew the VPN token") == gap_key("  how to renew\tthe vpn TOKEN ")
    assert gap_key("How to renew the VPN token") != gap_key("How to renew the VPN token?")
    assert gap_key("How to renew the VPN token") != gap_key("How to revoke the VPN token")


@pytest.mark.parametrize(("first", "second"), [
    ("What port does the metrics exporter listen on?", "metrics exporter listening port"),
    ("rotating API keys", "Rotated the api key"),
    ("How to renew the VPN token", "renew VPN token how to?"),
    # Stop words alone: the words themselves, in any case or spacing.
    ("how do I do it", "How do I  do it"),
])
def test_the_same_content_terms_join_one_group_at_write(first: str, second: str) -> None:
    assert terms_key(first) == terms_key(second)


@pytest.mark.parametrize(("first", "second"), [
    ("how to deploy the billing service to staging",
     "how to deploy the billing service to production"),
    ("which region hosts the EU customers' data", "which region hosts the US customers' data"),
    ("how do I do it", "what is it"),
])
def test_other_content_terms_are_other_groups_until_the_keeper_folds_them(
        first: str, second: str) -> None:
    assert terms_key(first) != terms_key(second)


def test_a_gap_keeps_its_text_with_secrets_redacted() -> None:
    assert kept_text(f"why is {TOKEN} refused") == "why is [REDACTED:github_token] refused"
    assert kept_text("where is the VPN config") == "where is the VPN config"


def sighting(text: str, seconds: int, agent: str | None = "ann",
             query: str | None = None) -> GapSighting:
    return GapSighting("team-a", agent, "implicit", text, query,
                       T0 + timedelta(seconds=seconds))


def test_a_batch_counts_each_row_once_with_its_latest_words_and_first_sighting() -> None:
    rows = counted([
        sighting("Where is the VPN config", 5),
        sighting("where is the  vpn config", 1),
        sighting("where is the vpn config", 3, agent=None),
        sighting("where is the vpn config", 2, agent="bob"),
    ])
    assert [(row.agent_id, row.text, times, first.second)
            for row, times, first in rows] == [
        (None, "where is the vpn config", 1, 3),
        ("ann", "Where is the VPN config", 2, 1),
        ("bob", "where is the vpn config", 1, 2),
    ]
    assert [row.seen_at.second for row, _, _ in rows] == [3, 5, 2]


def test_a_batch_counts_the_redacted_words() -> None:
    ((row, times, _),) = counted([sighting(f"why is {TOKEN} refused", 1, query=TOKEN),
                                  sighting(f"Why is {TOKEN} refused", 2)])
    assert (row.text, row.query, times) == ("Why is [REDACTED:github_token] refused", None, 2)
    ((row, _, _),) = counted([sighting("vpn", 1, query=f"vpn {TOKEN}")])
    assert row.query == "vpn [REDACTED:github_token]"
