"""A record's lexical words: its restatements' words are its own (issue 37)."""

from __future__ import annotations

from datetime import UTC, datetime

from memstream_client.events import Provenance
from processors.memory.lifecycle import Current, restated
from processors.text.lexical import (
    document_vector,
    query_vector,
    record_presence,
    record_vector,
    restatement_texts,
    term_id,
    term_presence,
    terms,
)
from schemas.records import Record

T0 = datetime(2026, 11, 23, tzinfo=UTC)
TWIN = "Deploys to staging need the office VPN."
AGAIN = "Staging deployments require the office VPN tunnel."


def record(record_id: str, text: str, **fields: object) -> Record:
    return Record.model_validate({
        "record_id": record_id, "namespace": "team-a", "record_kind": "memory", "text": text,
        "provenance": Provenance(source_event_id=f"e-{record_id}", source_topic="memory.events",
                                 source_partition=0, source_offset=1, producer="agent-7"),
        "created_at": T0, **fields})


def folded() -> Record:
    """TWIN with AGAIN folded into it, as the twin rule leaves it."""
    return restated(Current(record("mem_1", TWIN), 1), record("mem_2", AGAIN), 0.91).record


def test_a_restated_record_holds_the_words_only_its_restatement_holds() -> None:
    twin = folded()
    assert restatement_texts(twin.body) == [AGAIN]
    only_again = {term_id(term) for term in set(terms(AGAIN)) - set(terms(TWIN))}
    assert only_again, "the restatement words the fact otherwise"
    assert only_again <= set(record_vector(twin).indices)
    assert not only_again & set(record_vector(record("mem_1", TWIN)).indices)
    held = record_presence(twin).weights()
    assert all(held[index] == 1.0 for index in only_again)
    query = query_vector([term_id("tunnel")], {term_id("tunnel"): 1}, 10)
    assert record_vector(twin).dot(query) > 0


def test_a_restatement_repeating_the_words_does_not_weigh_them_up() -> None:
    once = document_vector(TWIN, occurred_at=T0)
    assert document_vector(TWIN, occurred_at=T0, restatements=[TWIN, TWIN]) == once
    grown = document_vector(TWIN, occurred_at=T0, restatements=[AGAIN])
    shared = term_id("vpn")
    assert grown.weights()[shared] <= once.weights()[shared], "longer, not more of it"


def test_term_presence_and_the_vector_read_the_same_restatements() -> None:
    twin = folded()
    assert set(record_presence(twin).indices) == set(term_presence(
        TWIN, contexts=(), occurred_at=T0, restatements=[AGAIN]))
    assert record_vector(twin) == document_vector(TWIN, occurred_at=T0, restatements=[AGAIN])


def test_restatements_other_than_texts_are_left_out() -> None:
    assert restatement_texts({"restatements": [{"text": AGAIN}, {"text": 3}, "loose", {}]}) \
        == [AGAIN]
    assert restatement_texts({"restatements": "not a list"}) == []
    assert restatement_texts({}) == []
