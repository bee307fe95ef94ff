"""The link-following evaluation's data and figures (bench/link_eval.py)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bench.link_eval import (
    figures,
    first_rank,
    load,
    problems_of,
    pushed_down,
    rank_changes,
    recall,
    waves,
)


def test_the_data_file_is_valid_and_balanced() -> None:
    data = load()
    memories, questions = data["memories"], data["questions"]
    assert 40 <= len(memories) <= 60
    assert len(questions) >= 40
    assert len({q["question"] for q in questions}) == len(questions)
    by_hops = Counter(q["hops"] for q in questions)
    assert set(by_hops) == {0, 1, 2}
    assert max(by_hops.values()) - min(by_hops.values()) <= 3


def test_a_project_is_named_only_by_its_anchor_page() -> None:
    """Facts and component pages do not name their project: a question about the project
    reaches them only through links."""
    memories = load()["memories"]
    anchors = {m["key"]: m["title"].split(":", 1)[1].strip() for m in memories
               if m.get("title", "").startswith("Project: ")}
    assert len(anchors) == 6
    for memory in memories:
        for key, name in anchors.items():
            if memory["key"] != key:
                assert not re.search(rf"\b{name}\b", memory["text"], re.I), (memory["key"], name)


def test_every_related_target_is_published_before_its_source() -> None:
    memories = load()["memories"]
    wave_of = {key: n for n, wave in enumerate(waves(memories)) for key in wave}
    assert set(wave_of) == {m["key"] for m in memories}
    for memory in memories:
        for target in memory.get("related", []):
            assert wave_of[target] < wave_of[memory["key"]]


def _toy(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "about": "toy",
        "memories": [
            {"key": "p", "title": "Project: Toy", "type": "fact", "text": "See [[Part]]."},
            {"key": "c", "title": "Part", "type": "fact", "text": "A part.", "related": ["f"]},
            {"key": "f", "type": "fact", "text": "A fact."},
        ],
        "questions": [{"question": "q?", "answers": ["f"], "hops": 2, "class": "wiki>related"}],
    }
    data.update(changes)
    return data


def test_a_valid_toy_has_no_problems_and_publishes_in_order() -> None:
    data = _toy()
    assert problems_of(data) == []
    assert waves(data["memories"]) == [["p", "f"], ["c"]]


@pytest.mark.parametrize(("memories", "questions", "problem"), [
    (None, [{"question": "q?", "answers": ["nope"], "hops": 0, "class": "direct"}],
     "answer 'nope' unknown"),
    (None, [{"question": "q?", "answers": ["f"], "hops": 3, "class": "direct"}],
     "hops 3 not in 0..2"),
    (None, [{"question": "q?", "answers": [], "hops": 0, "class": "direct"}], "no answers"),
    ([{"key": "f", "type": "fact", "text": "A fact.", "related": ["gone"]}], None,
     "related key 'gone' unknown"),
    ([{"key": "f", "type": "fact", "text": "See [[Nowhere]]."}], None,
     "[[Nowhere]] names no title"),
    ([{"key": "f", "type": "musing", "text": "A fact."}], None, "is no memory type"),
    ([{"key": "f", "type": "fact", "text": "One."}, {"key": "f", "type": "fact", "text": "Two."}],
     None, "key 'f' twice"),
    ([{"key": "a", "type": "fact", "text": "A.", "related": ["f"]},
      {"key": "f", "type": "fact", "text": "F.", "related": ["a"]}], None, "cycle"),
])
def test_problems_are_named(memories: list[dict[str, Any]] | None,
                            questions: list[dict[str, Any]] | None, problem: str) -> None:
    changes: dict[str, Any] = {}
    if memories is not None:
        changes["memories"] = memories
    if questions is not None:
        changes["questions"] = questions
    found = problems_of(_toy(**changes))
    assert any(problem in each for each in found), found


def test_load_refuses_a_broken_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(_toy(questions=[
        {"question": "q?", "answers": ["x"], "hops": 1, "class": "wiki"}])))
    with pytest.raises(ValueError, match="answer 'x' unknown"):
        load(path)


QUESTIONS = [
    {"question": "a", "answers": ["a1"], "hops": 0, "class": "direct"},
    {"question": "b", "answers": ["b1", "b2"], "hops": 1, "class": "wiki"},
    {"question": "c", "answers": ["c1"], "hops": 2, "class": "wiki>related"},
    {"question": "d", "answers": ["d1"], "hops": 0, "class": "direct"},
]


def test_recall_counts_any_answer_within_the_top_k() -> None:
    rankings = [["a1", "x"], ["x", "x", "b2"], ["x"] * 5 + ["c1"], []]
    assert first_rank(rankings[1], ["b1", "b2"]) == 3
    assert first_rank(rankings[3], ["d1"]) is None
    assert recall(rankings, QUESTIONS, 1) == 0.25
    assert recall(rankings, QUESTIONS, 5) == 0.5
    assert recall([], [], 5) == 0.0
    result = figures(rankings, QUESTIONS)
    assert result["overall"] == {"questions": 4, "R@1": 0.25, "R@5": 0.5}
    assert result["by_hops"]["0"] == {"questions": 2, "R@1": 0.5, "R@5": 0.5}
    assert result["by_hops"]["1"] == {"questions": 1, "R@1": 0.0, "R@5": 1.0}
    assert result["by_hops"]["2"] == {"questions": 1, "R@1": 0.0, "R@5": 0.0}
    assert result["by_class"]["wiki"]["R@5"] == 1.0


def test_what_expansion_costs_and_gains() -> None:
    base = [["a1", "x"], ["x", "b1"], ["x"], ["x", "d1"]]
    expanded = [["a1", "y"], ["b1", "x"], ["x", "y", "c1"], ["x", "y", "z", "w", "v", "d1"]]
    cost_at_1 = pushed_down(base, expanded, QUESTIONS, 1)
    assert (cost_at_1["questions"], cost_at_1["worse"]) == (2, 0)
    cost_at_5 = pushed_down(base, expanded, QUESTIONS, 5)
    assert (cost_at_5["worse"], cost_at_5["share"], cost_at_5["which"]) == (1, 0.5, ["d"])
    assert rank_changes(base, expanded, QUESTIONS) == {
        "0": {"better": 0, "worse": 1, "same": 1},
        "1": {"better": 1, "worse": 0, "same": 0},
        "2": {"better": 1, "worse": 0, "same": 0}}
