"""Corrections awaiting review: the contested memory ranks below what contests it, the
correction is brought in when only the contested one matched, the pack says so in a line
within its budget, the summary marks it, and the answers carry it only when there is one."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, cast

import numpy as np
import pytest

from processors.recall.contested import (
    CONTESTED_WEIGHT,
    Contest,
    Ranked,
    corrected,
    corrections_missing,
    note,
    place_taken,
    settled,
)
from processors.recall.context_pack import Candidate, pack
from processors.recall.ranking import Fused
from processors.recall.summary import SummaryHit, grounded_rewrite, summarize
from processors.text.condense import approx_tokens
from stores.index.protocol import SearchScope
from stores.records import FoundRecord
from streams.api.rendering import hit_answer, item_answer
from streams.plumbing.runtime import Runtime
from streams.reads.search import Found, Hit, Viewpoint, with_corrections

OLD, NEW, OTHER, NEWEST = (f"mem_{c * 24}" for c in "abcd")
BY_NEW = Contest(OLD, NEW, "inv_1")


def ids(ranked: Sequence[Ranked]) -> list[str]:
    return [item.record_id for item in ranked]


# -- the ranking rule ------------------------------------------------------------------------

def test_a_contested_memory_ranks_below_its_correction_at_most_a_share_of_its_score() -> None:
    order = settled([Ranked(OLD, 0.9, BY_NEW), Ranked(OTHER, 0.7), Ranked(NEW, 0.6)])
    assert ids(order) == [OTHER, NEW, OLD]
    scores = {item.record_id: item.score for item in order}
    assert scores[OLD] == pytest.approx(CONTESTED_WEIGHT * 0.6)
    assert (scores[NEW], scores[OTHER]) == (0.6, 0.7), "only the contested one moves"


def test_one_already_below_its_correction_keeps_its_score() -> None:
    order = settled([Ranked(NEW, 0.9), Ranked(OTHER, 0.5), Ranked(OLD, 0.3, BY_NEW)])
    assert [(item.record_id, item.score) for item in order] == [
        (NEW, 0.9), (OTHER, 0.5), (OLD, 0.3)]


def test_without_its_correction_a_contested_memory_keeps_its_place() -> None:
    order = settled([Ranked(OLD, 0.9, BY_NEW), Ranked(OTHER, 0.7)])
    assert [(item.record_id, item.score) for item in order] == [(OLD, 0.9), (OTHER, 0.7)]


def test_a_chain_of_corrections_ranks_in_its_order_even_at_a_score_of_zero() -> None:
    chain = [Ranked(OLD, 0.0, BY_NEW), Ranked(NEW, 0.0, Contest(NEW, NEWEST, "inv_2")),
             Ranked(NEWEST, 0.0)]
    assert ids(settled(chain)) == [NEWEST, NEW, OLD]
    high = settled([Ranked(OLD, 1.0, BY_NEW), Ranked(NEW, 0.9, Contest(NEW, NEWEST, "inv_2")),
                    Ranked(NEWEST, 0.5)])
    assert ids(high) == [NEWEST, NEW, OLD]
    assert [item.score for item in high] == pytest.approx([0.5, 0.45, 0.405])


def test_two_memories_contesting_each_other_settle_without_looping() -> None:
    # The first met is settled below the other, which keeps its score.
    order = settled([Ranked(OLD, 0.8, BY_NEW), Ranked(NEW, 0.7, Contest(NEW, OLD, "inv_2"))])
    assert [(item.record_id, item.score) for item in order] == [
        (NEW, 0.7), (OLD, pytest.approx(CONTESTED_WEIGHT * 0.7))]


def test_ties_keep_the_order_given() -> None:
    assert ids(settled([Ranked(OTHER, 0.5), Ranked(NEWEST, 0.5)])) == [OTHER, NEWEST]


def test_the_corrections_missing_are_those_of_contested_records_not_shown() -> None:
    ranked = [Ranked(OLD, 0.9, BY_NEW), Ranked(OTHER, 0.8, Contest(OTHER, NEWEST, "inv_2")),
              Ranked(NEWEST, 0.1)]
    assert corrections_missing(ranked) == [NEW]
    assert corrections_missing([Ranked(OTHER, 0.8)]) == []


def test_a_correction_brought_in_takes_the_place_of_the_best_it_contests() -> None:
    ranked = [Ranked(OTHER, 0.5, Contest(OTHER, NEW, "inv_2")), Ranked(OLD, 0.9, BY_NEW)]
    assert place_taken(ranked, NEW).record_id == OLD


def test_a_correction_says_which_shown_memories_it_contests() -> None:
    ranked = [Ranked(NEW, 0.9), Ranked(OLD, 0.8, BY_NEW),
              Ranked(OTHER, 0.7, Contest(OTHER, NEW, "inv_2")),
              Ranked(NEWEST, 0.1, Contest(NEWEST, "mem_gone", "inv_3"))]
    assert corrected(ranked) == {NEW: (BY_NEW, Contest(OTHER, NEW, "inv_2"))}


def test_the_note_names_both_memories_and_the_diff() -> None:
    line = note(BY_NEW)
    assert line.startswith(f"{OLD} is contested by the newer {NEW}")
    assert "pending review, diff inv_1" in line


# -- the pack --------------------------------------------------------------------------------

def unit_vector(seed: int) -> np.ndarray:
    vector = np.random.default_rng(seed).standard_normal(384)
    return (vector / np.linalg.norm(vector)).astype(np.float32)


def candidate(record_id: str, tokens: int, contested: Contest | None = None,
              vector: np.ndarray | None = None) -> Candidate:
    return Candidate(
        section="long_term", record_id=record_id, kind="memory", text=f"text of {record_id}",
        source=f"record:{record_id}", trust_class="raw", provenance={},
        created_at=datetime(2026, 11, 1, tzinfo=UTC), age_days=1.0, score=0.5,
        token_cost=tokens, vector=unit_vector(ord(record_id[4]) + tokens) if vector is None
        else vector, contested=contested)


def test_a_pack_says_in_a_line_which_item_is_contested() -> None:
    packed = pack([candidate(NEW, 10), candidate(OLD, 30, BY_NEW), candidate(OTHER, 10)],
                  1000)
    assert [item.record_id for item in packed.items] == [NEW, OLD, OTHER]
    assert packed.notes == [note(BY_NEW)]


def test_a_contested_item_left_out_leaves_no_line() -> None:
    same = unit_vector(7)
    duplicate = pack([candidate(NEW, 10, vector=same), candidate(OLD, 10, BY_NEW, same)],
                     1000)
    assert ([item.record_id for item in duplicate.items], duplicate.notes,
            duplicate.dropped["duplicate"]) == ([NEW], [], 1)
    # 100 tokens: half to the core's share unused, then 40% of it to long-term memory.
    over = pack([candidate(NEW, 10), candidate(OLD, 200, BY_NEW)], 100)
    assert ([item.record_id for item in over.items], over.notes) == ([NEW], [])


# -- the summary -----------------------------------------------------------------------------

STANDUP = SummaryHit(NEW, None, "The standup is now at 10:30.")
EARLY = SummaryHit(OLD, None, "The standup is at 9:00.", BY_NEW)


def test_a_summary_marks_the_contested_memory_and_names_its_correction() -> None:
    summary = summarize("when is the standup", [STANDUP, EARLY], 400, approx_tokens)
    lines = summary.text.splitlines()
    assert lines[-2:] == [f"- [{NEW}] The standup is now at 10:30.",
                          f"- [{OLD}] (contested by {NEW}, pending review) The standup is at "
                          "9:00."]
    assert (summary.memory_ids, summary.contested) == ((NEW, OLD), (BY_NEW,))


def test_a_rewrite_keeps_the_contest_or_is_refused() -> None:
    summary = summarize("when is the standup", [STANDUP, EARLY], 400, approx_tokens)
    silent = f"The standup is at 10:30 [{NEW}]; it was at 9:00 [{OLD}]."
    assert grounded_rewrite(silent, summary, 400, approx_tokens) is None
    said = f"The standup is at 10:30 [{NEW}]; 9:00 [{OLD}] is contested by it, pending review."
    assert grounded_rewrite(said, summary, 400, approx_tokens) == said
    # A contested memory shown without its correction names it all the same.
    alone = summarize("when is the standup", [EARLY], 400, approx_tokens)
    assert alone.memory_ids == (OLD,) and alone.named_ids == {OLD, NEW}
    assert grounded_rewrite(f"9:00 [{OLD}], contested by [{NEW}].", alone, 400,
                            approx_tokens) is not None


# -- the read core ---------------------------------------------------------------------------

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def found_record(record_id: str, *, contested: Contest | None = None, tags: tuple[str, ...] = (),
                 seed: int = 0) -> FoundRecord:
    return FoundRecord(
        record_id=record_id, record_kind="memory", title=None, text=f"text of {record_id}",
        body={}, source_ref=None, created_at=T0, related_ids=(), tags=tags, scope="shared",
        agent_id=None, review_state="approved", trust_class="raw", tier="active",
        run_ref=None, version=1, memory_type="fact", thread=None, provenance={},
        expires_at=None, embedding=unit_vector(seed), contested=contested)


class Records:
    def __init__(self, stored: Sequence[FoundRecord]) -> None:
        self.stored = {record.record_id: record for record in stored}
        self.asked: list[list[str]] = []

    async def records_by_id(self, namespace: str,
                            record_ids: Sequence[str]) -> dict[str, FoundRecord]:
        self.asked.append(list(record_ids))
        return {i: self.stored[i] for i in record_ids if i in self.stored}


def runtime(records: Records) -> Runtime:
    stores = type("Stores", (), {"records": records})()
    return cast(Runtime, type("FakeRuntime", (), {"stores": stores,
                                                  "confidence_thresholds": {}})())


def hit(record: FoundRecord, score: float, relevance: float = 0.8) -> Hit:
    return Hit(record, Fused(record.record_id, score, 1, 1), score, 0.5, relevance)


def searched(*hits: Hit) -> Found:
    return Found(list(hits), False, unit_vector(99))


async def test_a_correction_the_question_missed_is_brought_in_above_what_it_contests() -> None:
    records = Records([found_record(NEW, seed=2)])
    found = searched(hit(found_record(OLD, contested=BY_NEW, seed=1), 0.9, 0.75),
                     hit(found_record(OTHER, seed=3), 0.5))
    settled_hits = (await with_corrections(runtime(records), found, SearchScope("ns", 5, 0.5),
                                           Viewpoint())).hits
    assert [h.record.record_id for h in settled_hits] == [NEW, OLD, OTHER]
    brought, contested = settled_hits[0], settled_hits[1]
    assert (brought.score, brought.relevance, brought.corrects) == (0.9, 0.75, (BY_NEW,))
    assert brought.similarity == pytest.approx(float(unit_vector(2) @ unit_vector(99)))
    assert contested.score == pytest.approx(CONTESTED_WEIGHT * 0.9)
    assert records.asked == [[NEW]]


async def test_the_limit_keeps_the_correction_before_what_it_contests() -> None:
    records = Records([found_record(NEW)])
    found = searched(hit(found_record(OTHER), 0.95), hit(found_record(OLD, contested=BY_NEW),
                                                         0.9))
    shown = (await with_corrections(runtime(records), found, SearchScope("ns", 2, 0.5),
                                    Viewpoint())).hits
    assert [(h.record.record_id, h.corrects) for h in shown] == [(OTHER, ()), (NEW, (BY_NEW,))]


async def test_a_correction_outside_the_searchs_scope_is_not_brought_in() -> None:
    records = Records([found_record(NEW, tags=("billing",))])
    found = searched(hit(found_record(OLD, contested=BY_NEW, tags=("ops",)), 0.9))
    shown = (await with_corrections(runtime(records), found,
                                    SearchScope("ns", 5, 0.5, tags=("ops",)),
                                    Viewpoint())).hits
    assert [(h.record.record_id, h.record.contested) for h in shown] == [(OLD, BY_NEW)]


async def test_hits_nothing_contests_cost_no_read() -> None:
    records = Records([])
    found = searched(hit(found_record(OLD), 0.9), hit(found_record(NEW), 0.5))
    assert await with_corrections(runtime(records), found, SearchScope("ns", 5, 0.5),
                                  Viewpoint()) is found
    assert records.asked == []


async def test_both_shown_need_no_read_and_the_older_follows() -> None:
    records = Records([])
    found = searched(hit(found_record(OLD, contested=BY_NEW), 0.9), hit(found_record(NEW), 0.5))
    shown = (await with_corrections(runtime(records), found, SearchScope("ns", 5, 0.5),
                                    Viewpoint())).hits
    assert [h.record.record_id for h in shown] == [NEW, OLD] and records.asked == []


# -- the answers -----------------------------------------------------------------------------

def rendered(answer: Any) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(answer.rendered())
    return value


def test_a_hit_says_it_is_contested_only_when_it_is() -> None:
    plain = rendered(hit_answer(hit(found_record(NEW), 0.5)))
    assert "contested" not in plain and "corrects" not in plain
    marked = rendered(hit_answer(hit(found_record(OLD, contested=BY_NEW), 0.4)))
    assert marked["contested"] == {"older": OLD, "newer": NEW, "diff_id": "inv_1"}
    correction = Hit(found_record(NEW), Fused(NEW, 0.5, 1, 1), 0.5, 0.5, 0.8,
                     corrects=(BY_NEW,))
    assert rendered(hit_answer(correction))["corrects"] == [
        {"older": OLD, "newer": NEW, "diff_id": "inv_1"}]


def test_a_pack_item_says_it_is_contested_only_when_it_is() -> None:
    assert "contested" not in rendered(item_answer(candidate(NEW, 10)))
    assert rendered(item_answer(candidate(OLD, 10, BY_NEW)))["contested"]["newer"] == NEW
