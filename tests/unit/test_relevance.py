"""What `min_score` is a floor on: a hit's relevance, fed by its embedding and its words."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from processors.recall.ranking import dense_support, query_support, relevance, support
from processors.text.calibration import CALIBRATIONS
from processors.text.lexical import coverage, query_term_ids, term_id, term_presence, terms


@pytest.mark.parametrize("model", sorted(CALIBRATIONS))
def test_dense_support_is_nothing_below_unrelated_and_full_from_the_same_subject(
        model: str) -> None:
    scale = CALIBRATIONS[model]
    unrelated, same = scale.dense_unrelated, scale.dense_same_subject
    assert dense_support(-0.3, scale) == 0.0
    assert dense_support(unrelated, scale) == 0.0
    assert dense_support((unrelated + same) / 2, scale) == pytest.approx(0.5)
    assert dense_support(same, scale) == 1.0
    assert dense_support(0.99, scale) == 1.0


def test_either_signal_suffices_and_both_count_more_than_either() -> None:
    assert support(0.0, 1.0) == 1.0
    assert support(1.0, 0.0) == 1.0
    assert support(0.0, 0.0) == 0.0
    assert support(0.5, 0.5) == pytest.approx(0.75)
    assert support(0.5, 0.5) > max(0.5, 0.5)


def test_relevance_needs_the_hit_and_the_best_hit_both() -> None:
    assert relevance(1.0, 1.0) == 1.0
    # A weak hit under a strong best one is still shown at 0.5...
    assert relevance(0.25, 1.0) == pytest.approx(0.5)
    # ...but nothing is, when the best hit itself is weak: "nothing here".
    assert relevance(0.2, 0.2) < 0.5
    assert relevance(0.0, 1.0) == 0.0


def _coverage(query: str, text: str, documents: int = 100,
              frequencies: dict[str, int] | None = None, **record: object) -> float:
    ids = query_term_ids(query)
    counts = {term_id(term): n for term, n in (frequencies or {}).items()}
    return coverage(ids, term_presence(text, **record),  # type: ignore[arg-type]
                    {i: counts.get(i, 1) for i in ids}, documents)


def test_a_record_holding_the_query_word_covers_it_fully_however_long() -> None:
    short = "Deploys need the VPN."
    long = " ".join(["The release notes describe the routine checks of every service."] * 100
                    + ["Finally, the mirror host is kestrel."])
    assert len(long) > 6000
    assert _coverage("VPN", short) == 1.0
    assert _coverage("kestrel", long) == 1.0


def test_rare_words_weigh_more_than_common_ones() -> None:
    counts = {"caroline": 1, "support": 40, "group": 40}
    query = "When did Caroline go to the support group?"
    names_the_person = _coverage(query, "Caroline went out.", frequencies=counts)
    names_the_group = _coverage(query, "The support group met.", frequencies=counts)
    assert names_the_person > names_the_group


def test_a_query_word_the_namespace_never_holds_is_not_covered() -> None:
    # "melanie" is in no record of this namespace: the question is about someone else.
    query = "What did Melanie paint?"
    covered = _coverage(query, "I paint landscapes on weekends.",
                        frequencies={"melanie": 0, "paint": 5})
    assert covered < 0.5


def test_context_covers_at_its_weight_and_the_date_fully() -> None:
    held = term_presence("We met at noon.", contexts=["The offsite in Lisbon.", "Budget talk."],
                         occurred_at=datetime(2023, 5, 8, tzinfo=UTC))
    assert held[term_id("noon")] == 1.0
    assert held[term_id("lisbon")] == 0.5
    assert held[term_id("budget")] == 0.25
    assert held[term_id("__m2023_05")] == 1.0
    # The question's date is one of its terms: a record of that month holds it.
    assert _coverage("What happened in May 2023?", "We met at noon.",
                     occurred_at=datetime(2023, 5, 8, tzinfo=UTC)) > \
        _coverage("What happened in May 2023?", "We met at noon.",
                  occurred_at=datetime(2023, 6, 8, tzinfo=UTC))


def test_a_query_of_stop_words_only_covers_nothing() -> None:
    assert terms("what was it?") == []
    assert _coverage("what was it?", "it was what it was") == 0.0


@pytest.mark.parametrize("model", sorted(CALIBRATIONS))
def test_a_query_of_one_term_is_supported_by_its_word_alone(model: str) -> None:
    scale = CALIBRATIONS[model]
    near = scale.dense_same_subject
    # Two terms or more: the embedding supports a record that lacks the words...
    assert query_support(near, 0.0, 2, scale) == 1.0
    # ...one term: only the word does, however close a lone word's embedding lies.
    assert query_support(near, 0.0, 1, scale) == 0.0
    assert query_support(near, 1.0, 1, scale) == 1.0
    # A query of no content term has no word to decide: its embedding still does.
    assert query_support(near, 0.0, 0, scale) == 1.0
