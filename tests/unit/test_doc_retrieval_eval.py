"""The documents benchmark's questions and scoring (bench/doc_retrieval_eval.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from bench.doc_retrieval_eval import (
    PROVENANCE,
    Question,
    answers,
    documents,
    first_rank,
    load_questions,
    recall_of,
)
from processors.documents.chunking import HEADING_SEPARATOR, markdown_sections
from schemas.records import Record


def test_every_question_names_a_section_of_its_document() -> None:
    questions = load_questions()
    assert len(questions) >= 40
    assert len({q.text for q in questions}) == len(questions)
    sections = {doc_id: {HEADING_SEPARATOR.join(s.heading_path)
                         for s in markdown_sections(text)}
                for doc_id, text in documents()}
    for question in questions:
        assert question.heading in sections[question.doc_id], question


def chunk(record_id: str, doc_id: str, heading: str | None) -> Record:
    return Record(record_id=record_id, namespace="n", record_kind="doc_chunk", title=heading,
                  text="t", source_ref=doc_id, provenance=PROVENANCE,
                  created_at=datetime.now(UTC))


def test_a_chunk_answers_when_its_document_and_heading_path_match() -> None:
    question = Question("q", "a.md", "A > B")
    by_id = {"1": chunk("1", "b.md", "A > B"), "2": chunk("2", "a.md", "A"),
             "3": chunk("3", "a.md", "A > B"), "4": chunk("4", "a.md", None)}
    assert [answers(by_id[i], question) for i in "1234"] == [False, False, True, False]
    assert answers(by_id["4"], Question("q", "a.md", ""))
    assert first_rank(["1", "2", "3"], by_id, question) == 3
    assert first_rank(["1", "2"], by_id, question) is None
    found = recall_of([1, 3, None, 6])
    assert (found.at_1, found.at_5, round(found.mrr, 4)) == (0.25, 0.5, round(
        (1 + 1 / 3 + 1 / 6) / 4, 4))
