import json
import math
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench.retrieval_eval import (
    BM25Okapi,
    Conversation,
    Question,
    Turn,
    any_evidence_at,
    content_tokens,
    crude_stem,
    evidence_recall_at,
    load_conversations,
    memory_text,
    memory_write,
    parse_evidence,
    parse_session_time,
    recall,
    recall_by_category,
    reciprocal_rank_fusion,
    with_previous_turn,
    word_tokens,
)


@pytest.mark.parametrize(("raw", "expected"), [
    ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
    ("12:09 am on 13 September, 2023", datetime(2023, 9, 13, 0, 9, tzinfo=UTC)),
    ("12:30 pm on 1 Jan, 2024", datetime(2024, 1, 1, 12, 30, tzinfo=UTC)),
    ("10:04 AM on 19 October 2023", datetime(2023, 10, 19, 10, 4, tzinfo=UTC)),
])
def test_session_times_are_aware_utc(raw: str, expected: datetime) -> None:
    assert parse_session_time(raw) == expected


@pytest.mark.parametrize("raw", ["8 May 2023", "13:00 pm on 8 May, 2023", "1:56 pm on 8 Mai, 2023"])
def test_unparseable_session_times_are_refused(raw: str) -> None:
    with pytest.raises(ValueError, match="session time"):
        parse_session_time(raw)


def test_evidence_is_split_stripped_deduplicated_and_checked() -> None:
    known = {"D1:3", "D8:6", "D9:17"}
    usable, unusable = parse_evidence(["D8:6; D9:17", " D1:3", "D8: 6", "D30:1", ""], known)
    assert usable == ["D8:6", "D9:17", "D1:3"]
    assert unusable == ["D30:1"]


def test_recall_any_evidence_and_fraction() -> None:
    ranked = ["D1:1", "D1:2", "D1:3", "D1:4", "D1:5", "D1:6"]
    assert any_evidence_at(ranked, ["D1:3", "D9:9"], 1) == 0.0
    assert any_evidence_at(ranked, ["D1:3", "D9:9"], 5) == 1.0
    assert evidence_recall_at(ranked, ["D1:3", "D9:9"], 5) == 0.5
    assert evidence_recall_at(ranked, ["D1:1", "D1:6"], 5) == 0.5
    assert evidence_recall_at(ranked, ["D1:1", "D1:6"], 10) == 1.0


def test_recall_averages_over_questions_and_categories() -> None:
    questions = [Question("q1", 1, ("A",), ()), Question("q2", 4, ("B", "C"), ()),
                 Question("q3", 4, ("D",), ())]
    rankings = [["A"], ["X", "B"], ["X"]]
    figures = recall_by_category(questions, rankings)
    assert figures["all"].questions == 3
    assert figures["all"].any_evidence == pytest.approx({1: 1 / 3, 5: 2 / 3, 10: 2 / 3})
    assert figures["all"].evidence_recall[5] == pytest.approx((1 + 0.5 + 0) / 3)
    assert figures["multi-hop"].any_evidence[1] == 1.0
    assert figures["single-hop"].any_evidence[5] == 0.5
    assert math.isnan(figures["temporal"].any_evidence[1])
    with pytest.raises(ValueError, match="rankings"):
        recall(questions, rankings[:2])


def test_bm25_matches_rank_bm25_on_a_toy_corpus() -> None:
    corpus = [["hello", "there", "good", "man"], ["it", "is", "quite", "windy", "in", "london"],
              ["how", "is", "the", "weather", "today"]]
    scores = BM25Okapi(corpus).scores(["windy", "london"])
    # The example of rank_bm25's README: BM25Okapi(corpus).get_scores(["windy", "london"]).
    assert scores == pytest.approx([0.0, 0.93729472, 0.0], abs=1e-8)
    # "is" is in 2 of 3 documents: its IDF is negative and floored at 0.25 x the mean IDF.
    is_scores = BM25Okapi(corpus).scores(["is"])
    assert is_scores[0] == 0.0 and 0 < is_scores[1] < scores[1]


def test_bm25_counts_a_repeated_query_term_twice() -> None:
    bm25 = BM25Okapi([["a", "b"], ["c", "d"], ["e", "f"]])
    assert bm25.scores(["a", "a"])[0] == pytest.approx(2 * bm25.scores(["a"])[0])


def test_reciprocal_rank_fusion_weights_and_breaks_ties_by_position() -> None:
    assert reciprocal_rank_fusion([[0, 1, 2], [1, 2, 0]]) == [1, 0, 2]
    assert reciprocal_rank_fusion([[2, 1, 0], [0, 1, 2]]) == [0, 2, 1]
    assert reciprocal_rank_fusion([[0, 1], [1, 0]], [3.0, 1.0]) == [0, 1]


def test_content_tokens_drop_stop_words_and_stem() -> None:
    assert word_tokens("Caroline: I'm painting!") == ["caroline", "i", "m", "painting"]
    assert content_tokens("What did Melanie paint? She painted sunsets") == [
        "melani", "paint", "paint", "sunset"]  # crude: names lose a final "e" too
    assert [crude_stem(w) for w in ("classes", "stories", "games", "game", "running", "was")] == [
        "class", "story", "gam", "gam", "run", "was"]


def test_a_turn_is_indexed_with_the_turn_before_it_in_its_session() -> None:
    at = datetime(2023, 5, 8, tzinfo=UTC)
    turns = [Turn("D1:1", 1, "a", at), Turn("D1:2", 1, "b", at), Turn("D2:1", 2, "c", at)]
    assert with_previous_turn(turns) == ["a", "a b", "c"]


def test_memory_text_and_event() -> None:
    turn = {"speaker": "Mel", "text": "Look!", "dia_id": "D1:2", "query": "not said",
            "blip_caption": "a photo of a dog", "img_url": ["https://example.org/x.jpg"]}
    assert memory_text(turn) == "Mel: Look! [shares a photo of a photo of a dog]"
    at = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    conversation = Conversation("conv-1", (Turn("D1:2", 1, memory_text(turn), at),), (), 0)
    event = json.loads(memory_write("eval-0123abcd", conversation, conversation.turns[0]))
    assert event["namespace"] == "eval-0123abcd-conv-1"
    assert event["event_id"] == "eval-0123abcd-conv-1:D1:2"
    assert event["occurred_at"] == "2023-05-08T13:56:00+00:00"
    assert event["payload"] == {"text": "Mel: Look! [shares a photo of a photo of a dog]",
                                "memory_type": "fact", "source_ref": "D1:2",
                                "thread": "conv-1:session_1"}


def test_loading_reads_sessions_in_order_and_skips_category_5(tmp_path: Path) -> None:
    sample = {"sample_id": "conv-9", "conversation": {
        "speaker_a": "A", "speaker_b": "B",
        "session_2_date_time": "1:00 pm on 2 May, 2023",
        "session_2": [{"speaker": "B", "dia_id": "D2:1", "text": "later"}],
        "session_1_date_time": "1:00 pm on 1 May, 2023",
        "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "first"}],
        "session_3_date_time": "1:00 pm on 3 May, 2023",
    }, "qa": [
        {"question": "q", "answer": "a", "evidence": ["D1:1; D2:1"], "category": 1},
        {"question": "q5", "adversarial_answer": "x", "evidence": ["D1:1"], "category": 5},
        {"question": "none", "answer": "a", "evidence": [], "category": 3},
    ]}
    path = tmp_path / "data.json"
    path.write_text(json.dumps([sample]))
    [conversation] = load_conversations(path)
    assert [t.dia_id for t in conversation.turns] == ["D1:1", "D2:1"]
    assert conversation.turns[0].text == "A: first"
    assert [q.evidence for q in conversation.questions] == [("D1:1", "D2:1"), ()]
    assert (conversation.skipped_adversarial, conversation.combined_evidence_entries) == (1, 1)
