"""Write-time twins: the nearest restated live memory, and what folding a write does."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memstream_client.events import Provenance
from processors.consolidation.candidates import ConsolidationCandidate
from processors.memory.lifecycle import Current, restated
from processors.memory.twins import Twin, folds, twin_of
from processors.text.calibration import SIMILARITY, calibration_of
from schemas.records import Record
from streams.plumbing.config import Settings

T0 = datetime(2026, 11, 23, tzinfo=UTC)


def candidate(record_id: str, text: str, **fields: object) -> ConsolidationCandidate:
    values: dict[str, object] = {
        "record_id": record_id, "namespace": "team-a", "scope": "shared", "agent_id": None,
        "record_kind": "memory", "memory_type": "fact", "text": text, "title": None,
        "tags": (), "related_ids": (), "review_state": "approved",
        "source_event_ids": (f"e-{record_id}",), "created_at": T0, **fields}
    return ConsolidationCandidate(**values)  # type: ignore[arg-type]


NEW = candidate("new", "Deploys to staging need the office VPN.")


def test_the_nearest_restated_memory_above_the_threshold_is_the_twin() -> None:
    neighbours = [(candidate("far", "Deploys to staging need the office VPN up."), 0.80),
                  (candidate("near", "Staging deploys need the office VPN."), 0.93),
                  (candidate("nearer", "Deploys to staging need the office VPN!"), 0.97)]
    assert twin_of(NEW, neighbours) == Twin("nearer", 0.97)
    assert twin_of(NEW, neighbours[:1]) is None, f"below {SIMILARITY.twin}"


def test_the_guard_and_the_partition_veto_a_twin() -> None:
    assert twin_of(NEW, [(candidate("v", "Deploys to production need the office VPN."),
                          0.95)]) is None
    port = candidate("new-port", "The staging VPN listens on port 443.")
    assert twin_of(port, [(candidate("n", "The staging VPN listens on port 8443."),
                           0.97)]) is None
    assert twin_of(NEW, [(candidate("t", NEW.text, memory_type="lesson"), 0.99)]) is None
    assert twin_of(NEW, [(candidate("p", NEW.text, scope="personal", agent_id="finn"),
                          0.99)]) is None
    assert twin_of(NEW, [(NEW, 1.0)]) is None, "not its own twin"


@pytest.mark.parametrize(("stored", "write"), [
    # Issue 37: each was folded into the memory it corrects, at cosine 0.8 or more.
    ("Marta owns the search relevance service.",
     "Ownership of the search relevance service passed from Marta to Idris."),
    ("The build agents run Ubuntu 20.04.", "The build agents were upgraded to Ubuntu 22.04."),
    ("Hotfixes are branched from the maintenance line.",
     "Hotfixes are now branched from the trunk."),
    ("The invoice service is maintained by Oren.", "The invoice service is maintained by Lea."),
    ("The team's retro board lives in Miro.",
     "The team replaced Miro with FigJam for the retro board."),
])
def test_a_correction_is_never_folded_into_what_it_corrects(stored: str, write: str) -> None:
    old, new = candidate("old", stored), candidate("new", write)
    assert twin_of(new, [(old, 0.97)]) is None
    assert not folds(new, old) and not folds(old, new), "nor the fact it corrected again"
    assert twin_of(new, [(candidate("again", write[:-1] + "!"), 0.97)]) == Twin(
        "again", 0.97), "its own restatement still is its twin"


def test_a_change_restated_is_a_twin() -> None:
    said = candidate("said", "Fenna took over the growth experiments from Caspar.")
    again = candidate("again", "The growth experiments were taken over by Fenna from Caspar.")
    assert twin_of(again, [(said, 0.99)]) == Twin("said", 0.99)


def record(record_id: str, text: str, event_id: str, **fields: object) -> Record:
    return Record.model_validate({
        "record_id": record_id, "namespace": "team-a", "record_kind": "memory", "text": text,
        "provenance": Provenance(source_event_id=event_id, source_topic="memory.events",
                                 source_partition=2, source_offset=7, producer="agent-7"),
        "created_at": T0, **fields})


def test_a_folded_write_keeps_the_twins_text_and_adds_its_provenance_and_tags() -> None:
    twin = record("mem_1", "Deploys to staging need the office VPN.", "e1", tags=("ops",))
    write = record("mem_2", "Staging deploys need the office VPN.", "e2", tags=("vpn",))
    outcome = restated(Current(twin, 3), write, 0.9312)
    assert outcome.change == "updated" and outcome.new_version
    assert outcome.record.text == twin.text
    assert outcome.record.tags == ("ops", "vpn")
    assert outcome.changed == ("restatements", "tags")
    assert outcome.record.body["restated"] == 1
    assert outcome.record.body["restatements"] == [{
        "event_id": "e2", "record_id": "mem_2", "text": write.text, "producer": "agent-7",
        "occurred_at": T0.isoformat(), "source": "memory.events/2/7", "cosine": 0.9312}]
    assert outcome.reason == "restated by e2 (cosine 0.93)"


def test_twins_are_judged_at_the_similarity_models_threshold_whatever_the_retrieval_model(
        ) -> None:
    for model in ("e5-small-v2", "all-MiniLM-L6-v2"):
        assert Settings.from_env({"MEMSTREAM_MODEL": model}).twin_cosine == SIMILARITY.twin
    # A retrieval model's candidates reach the judge from its own floor; the similarity
    # model's floor is its threshold.
    assert calibration_of(SIMILARITY.model).twin_candidate == SIMILARITY.twin
    assert calibration_of("e5-small-v2").twin_candidate > SIMILARITY.twin
    assert Settings.from_env({"MEMSTREAM_TWIN_COSINE": "off"}).twin_cosine is None
    assert Settings.from_env({"MEMSTREAM_TWIN_COSINE": "0.9"}).twin_cosine == 0.9


def test_a_text_met_again_gets_the_same_verdict_from_the_guard() -> None:
    # The guard's reading of a text is kept (processors/consolidation/restatements.py): a text met
    # again, with another record id or on another day, is judged on its own day.
    again = candidate("again", "Staging deploys need the office VPN.")
    later = candidate("later", "Staging deploys need the office VPN today.",
                      created_at=datetime(2026, 11, 24, tzinfo=UTC))
    today = candidate("today", "Staging deploys need the office VPN today.")
    assert twin_of(NEW, [(again, 0.99)]) == Twin("again", 0.99)
    assert twin_of(NEW, [(again, 0.99)]) == Twin("again", 0.99)
    assert twin_of(today, [(later, 0.95)]) is None
    assert twin_of(candidate("today2", today.text), [(today, 0.99)]) == Twin("today", 0.99)
