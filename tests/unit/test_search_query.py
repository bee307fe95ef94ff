from datetime import UTC, datetime
from typing import Any

import pytest
from multidict import MultiDict

from processors.recall.ranking import Fused
from stores.records import FoundRecord
from streams.api.params import BadQuery
from streams.api.queries import fix_pattern_query, search_query
from streams.api.rendering import hit_answer
from streams.reads.search import Hit


def params(**values: str | list[str]) -> MultiDict[str]:
    """A query string: a list is a parameter repeated."""
    pairs: list[tuple[str, str]] = []
    for name, value in values.items():
        pairs += [(name, item) for item in (value if isinstance(value, list) else [value])]
    return MultiDict(pairs)


def test_defaults_follow_the_contract() -> None:
    query = search_query(params(namespace="a", query="vpn"), None)
    scope = query.scope
    assert (scope.limit, scope.min_score, scope.related_ids) == (5, 0.5, ())
    # Memories and history; chunks of documents only when asked for.
    assert scope.record_kinds == ("memory", "run_digest", "fix_pattern")
    asked = search_query(params(namespace="a", query="vpn", kind="doc_chunk"), None)
    assert asked.scope.record_kinds == ("doc_chunk",)
    assert scope.review_states == ("approved",), "approved only, unless asked"
    assert (query.profile.name, query.run_id) == ("default", None)


def test_related_ids_stand_for_the_query_and_are_capped() -> None:
    query = search_query(params(namespace="a", related_id=["mem_1,mem_2", "mem_1"]),
                                    None)
    assert (query.query, query.scope.related_ids) == ("", ("mem_1", "mem_2"))
    with pytest.raises(BadQuery, match="query is required"):
        search_query(params(namespace="a"), None)
    with pytest.raises(BadQuery, match="related_id: at most 100 in one request"):
        search_query(params(namespace="a", related_id=",".join(
            f"mem_{n}" for n in range(101))), None)


def test_kinds_may_repeat_or_be_comma_separated() -> None:
    query = search_query(params(namespace="a", query="q",
                                           kind=["memory,run_digest", "memory"]), None)
    assert query.scope.record_kinds == ("memory", "run_digest")


def test_filters_reach_the_scope() -> None:
    query = search_query(params(
        namespace="a", query="q", tag=["ops", "db"], memory_type="decision,lesson",
        tier="long_term", review_state=["approved", "draft"], since="2026-01-01",
        until="2026-02-01T12:00:00+00:00", run_id="run-7"), "ann")
    scope = query.scope
    assert scope.tags == ("ops", "db")
    assert scope.memory_types == ("decision", "lesson")
    assert scope.tiers == ("long_term",)
    assert scope.review_states == ("approved", "draft")
    assert scope.since == datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    assert scope.until == datetime(2026, 2, 1, 12, tzinfo=UTC).timestamp()
    assert (scope.agent_id, query.run_id) == ("ann", "run-7")


def test_a_profile_narrows_kinds_and_types_unless_the_request_does() -> None:
    incident = search_query(params(namespace="a", query="q", profile="incident"), None)
    assert incident.scope.record_kinds == ("fix_pattern", "run_digest", "memory")
    assert "lesson" in incident.scope.memory_types
    asked = search_query(params(namespace="a", query="q", profile="incident",
                                           kind="memory"), None)
    assert asked.scope.record_kinds == ("memory",)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"query": "q"}, "namespace is required"),
        ({"namespace": " ", "query": "q"}, "namespace is required"),
        ({"namespace": "a"}, "query is required"),
        ({"namespace": "a", "query": "q", "limit": "0"}, "limit: must be an integer from 1"),
        ({"namespace": "a", "query": "q", "limit": "x"}, "limit: must be an integer"),
        ({"namespace": "a", "query": "q", "min_score": "2"}, "min_score: must be a number"),
        ({"namespace": "a", "query": "q", "kind": "nonsense"}, "kind: unknown 'nonsense'"),
        ({"namespace": "a", "query": "q", "memory_type": "gossip"}, "memory_type: unknown"),
        ({"namespace": "a", "query": "q", "review_state": "maybe"}, "review_state: unknown"),
        ({"namespace": "a", "query": "q", "since": "last week"}, "ISO 8601"),
        ({"namespace": "a", "query": "q", "profile": "brunch"}, "profile: unknown 'brunch'"),
    ],
)
def test_unusable_requests_say_why(values: dict[str, str], message: str) -> None:
    with pytest.raises(BadQuery, match=message):
        search_query(params(**values), None)


def test_a_fix_pattern_lookup_takes_the_error_text_and_the_same_limits() -> None:
    query = fix_pattern_query(
        {"namespace": "a", "error": "KeyError: 'x'", "limit": "3", "min_score": "0.4"})
    assert (query.error, query.limit, query.min_score) == ("KeyError: 'x'", 3, 0.4)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"error": "boom"}, "namespace is required"),
        ({"namespace": "a", "error": "  "}, "error is required"),
        ({"namespace": "a", "error": "x" * 40000}, "longer than"),
        ({"namespace": "a", "error": "boom", "limit": "0"}, "limit: must be an integer from 1"),
    ],
)
def test_a_fix_pattern_lookup_refuses_bad_parameters(params: dict[str, str], message: str) -> None:
    with pytest.raises(BadQuery, match=message):
        fix_pattern_query(params)


def _found(**fields: Any) -> FoundRecord:
    base = FoundRecord(
        record_id="mem_1", record_kind="memory", title=None, text="Deploys need VPN.",
        body={}, source_ref=None, created_at=datetime(2026, 11, 1, tzinfo=UTC),
        related_ids=(), tags=(), scope="shared", agent_id=None, review_state="approved",
        trust_class="derived", tier="active", run_ref=None, version=1, memory_type="fact",
        thread=None, provenance={}, expires_at=None, embedding=None)
    return base._replace(**fields)


def test_a_merged_hit_shows_its_members_source_refs() -> None:
    fused = Fused("mem_1", 1.0, 1, None)
    merged = _found(body={"merged_from": ["m1", "m2"], "member_source_refs": ["D1:3", "run-42"]})
    assert hit_answer(Hit(merged, fused, 1.0, 0.9, 0.9)).member_source_refs == ["D1:3", "run-42"]
    assert hit_answer(Hit(_found(), fused, 1.0, 0.9, 0.9)).member_source_refs == []
