"""The rules of a rating: the `memory.rate` event as intake checks it (memstream_client/events.py),
who may rate what (processors/recall/ratings.py; a gap's rules: tests/unit/test_gaps.py), the
accesses a batch of the retrieval log counts (stores/recall/retrievals.py), the CLI's
`ID:useful|ID:not`, and a memory's scores as answered (streams/api/memory/ratings.py). The
stage and the route on the real stack: tests/integration/test_ratings.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from memstream_client.answers.base import Answer
from memstream_client.answers.scoring import AgentMemoryUse, MemoryScores, Valuation
from memstream_client.cli.commands import rating_of
from memstream_client.cli.errors import CliError
from memstream_client.events import MEMORY_EVENT_TYPES, MemoryRate
from processors.events.errors import Rejected
from processors.events.intake import parse_event
from processors.recall.adaptive_scoring import MemoryUse, ScoringConfig
from processors.recall.ratings import Owner, check_rateable, unrateable
from stores.recall.retrievals import Accesses, RetrievalRow, accesses_of
from stores.recall.scoring_configs import CurrentScoring
from streams.api.memory.ratings import use_view
from tests.answers_check import strict

NOW = datetime(2026, 11, 24, 10, 0, tzinfo=UTC)
MAX_BYTES = 1 << 20


def raw(payload: dict[str, Any]) -> bytes:
    return json.dumps({"event_id": "e1", "type": "memory.rate", "namespace": "team-a",
                       "occurred_at": NOW.isoformat(), "producer": "test",
                       "payload": payload}).encode()


def rated(memory_id: str = "mem_a", useful: Any = True) -> dict[str, Any]:
    return {"memory_id": memory_id, "useful": useful}


def test_a_rating_names_its_rater_its_memories_and_maybe_a_gap() -> None:
    parsed = parse_event(raw({"agent_id": "ann", "ratings": [rated(), rated("mem_b", False)],
                              "gap": "how to renew the VPN token\x00",
                              "gap_query": "vpn renewal"}), MEMORY_EVENT_TYPES, MAX_BYTES)
    assert isinstance(parsed.event, MemoryRate)
    payload = parsed.event.payload
    assert [(r.memory_id, r.useful) for r in payload.ratings] == [("mem_a", True),
                                                                  ("mem_b", False)]
    # The gap is prose: cleaned of U+0000 and stored, the change counted.
    assert (payload.gap, parsed.sanitized) == ("how to renew the VPN token", {"gap": 1})


@pytest.mark.parametrize(("payload", "says"), [
    ({"agent_id": "ann", "ratings": []}, "at least 1"),
    ({"agent_id": "ann", "ratings": [rated(f"mem_{n}") for n in range(51)]}, "at most 50"),
    ({"agent_id": "ann", "ratings": [rated(useful="yes")]}, "valid boolean"),
    ({"agent_id": "ann", "ratings": [rated(useful=1)]}, "valid boolean"),
    ({"agent_id": "ann", "ratings": [rated(), rated(useful=False)]}, "rated once"),
    ({"agent_id": "ann", "ratings": [rated()], "gap": "g" * 2001}, "at most 2000"),
    ({"agent_id": "ann", "ratings": [rated()], "gap_query": "vpn"}, "needs the gap"),
    ({"ratings": [rated()]}, "agent_id"),
    ({"agent_id": "ann", "ratings": [{"memory_id": "mem_a"}]}, "useful"),
])
def test_a_bad_rating_is_an_invalid_event(payload: dict[str, Any], says: str) -> None:
    with pytest.raises(Rejected) as rejected:
        parse_event(raw(payload), MEMORY_EVENT_TYPES, MAX_BYTES)
    assert rejected.value.reason == "invalid_event"
    assert says in rejected.value.detail


FOUND = {"mem_shared": Owner("shared", None), "mem_ann": Owner("personal", "ann"),
         "mem_bob": Owner("personal", "bob"), "mem_bobs_shared": Owner("shared", "bob")}


def test_an_agent_rates_the_shared_memories_and_its_own() -> None:
    assert unrateable("ann", ["mem_shared", "mem_ann", "mem_bobs_shared"], FOUND) == []
    assert unrateable("ann", ["mem_bob", "mem_shared", "mem_gone"], FOUND) == \
        ["mem_bob", "mem_gone"]
    assert unrateable("bob", ["mem_ann", "mem_bob"], FOUND) == ["mem_ann"]


def test_one_memory_it_may_not_rate_rejects_the_whole_rating_as_a_missing_one_would() -> None:
    check_rateable("ann", "team-a", ["mem_shared", "mem_ann"], FOUND)
    details = []
    for memory_id in ("mem_bob", "mem_gone"):
        with pytest.raises(Rejected) as rejected:
            check_rateable("ann", "team-a", ["mem_shared", memory_id], FOUND)
        assert rejected.value.reason == "broken_reference"
        details.append(rejected.value.detail.replace(memory_id, "ID"))
    assert details[0] == details[1], "another agent's memory is told as a missing one"


def row(agent: str | None, record_id: str, seconds: int, namespace: str = "team-a"
        ) -> RetrievalRow:
    return RetrievalRow(namespace, record_id, agent, None, "q", "/v1/search", 1,
                        NOW + timedelta(seconds=seconds))


def test_a_batch_of_the_log_counts_each_agents_accesses_and_the_last() -> None:
    rows = [row("bob", "mem_a", 5), row("ann", "mem_a", 3), row(None, "mem_a", 9),
            row("ann", "mem_a", 1), row("ann", "mem_b", 2), row("ann", "mem_a", 2, "team-b")]
    assert accesses_of(rows) == [
        Accesses("team-a", "ann", "mem_a", 2, NOW + timedelta(seconds=3)),
        Accesses("team-a", "ann", "mem_b", 1, NOW + timedelta(seconds=2)),
        Accesses("team-a", "bob", "mem_a", 1, NOW + timedelta(seconds=5)),
        Accesses("team-b", "ann", "mem_a", 1, NOW + timedelta(seconds=2)),
    ]
    assert accesses_of([row(None, "mem_a", 1)]) == []


def test_the_cli_reads_a_rating_as_id_and_verdict() -> None:
    assert rating_of("mem_a:useful") == ("mem_a", True)
    assert rating_of("mem:with:colons:not") == ("mem:with:colons", False)
    for bad in ("mem_a", "mem_a:yes", ":useful", "mem_a:"):
        with pytest.raises(CliError):
            rating_of(bad)


def closed_schema(model: type[Answer]) -> Draft202012Validator:
    """The model's schema as the worker's answers are held to it: no undeclared field."""
    return Draft202012Validator(strict(model.model_json_schema(mode="serialization")))


def test_a_memorys_scores_answer_one_agents_use_or_every_agents_in_one_declared_shape() -> None:
    use = MemoryUse(valuation_count=2, useful_count=1, last_valued_at=NOW, access_count=3,
                    last_accessed_at=NOW - timedelta(days=1))
    current = CurrentScoring(2, ScoringConfig(), "key:k1", NOW)
    mine = MemoryScores(namespace="team-a", agent_id="ann", memory_id="mem_a",
                        **dict(use_view(use, current, NOW)),
                        valuations=[Valuation(event_id="e1", useful=True, valued_at=NOW)])
    every = MemoryScores(namespace="team-a", memory_id="mem_a", agents=[
        AgentMemoryUse(agent_id="ann", **dict(use_view(use, current, NOW))),
        AgentMemoryUse(agent_id="bob", **dict(use_view(MemoryUse(), current, NOW)))])
    schema = closed_schema(MemoryScores)
    for scores in (mine, every):
        assert list(schema.iter_errors(json.loads(scores.rendered()))) == []
    answered = json.loads(mine.rendered())
    assert "agents" not in answered
    assert (answered["last_valuation_at"], answered["adaptive"]["config_version"]) == (
        NOW.isoformat(), 2)
    assert mine.use is not None
    assert (mine.use.valuation_count, mine.use.last_access_at) == (2, NOW - timedelta(days=1))
    answered = json.loads(every.rendered())
    assert set(answered) == {"namespace", "memory_id", "agents"}
    assert answered["agents"][1]["last_access_at"] is None
    assert every.use is None
