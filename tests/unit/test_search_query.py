import pytest

from streams.fix_pattern_search import FixPatternQuery
from streams.search import BadQuery, SearchQuery


def test_defaults_follow_the_contract() -> None:
    query = SearchQuery.from_params({"namespace": "a", "query": "vpn"}, [])
    scope = query.scope
    assert (scope.limit, scope.min_score, scope.record_kinds, scope.related_id) == (
        5, 0.5, (), None)


def test_kinds_may_repeat_or_be_comma_separated() -> None:
    query = SearchQuery.from_params({"namespace": "a", "query": "q"},
                                    ["memory,run_digest", "memory"])
    assert query.scope.record_kinds == ("memory", "run_digest")


@pytest.mark.parametrize(
    ("params", "kinds", "message"),
    [
        ({"query": "q"}, [], "namespace is required"),
        ({"namespace": " ", "query": "q"}, [], "namespace is required"),
        ({"namespace": "a"}, [], "query is required"),
        ({"namespace": "a", "query": "q", "limit": "0"}, [], "limit must be between"),
        ({"namespace": "a", "query": "q", "limit": "x"}, [], "must be numbers"),
        ({"namespace": "a", "query": "q", "min_score": "2"}, [], "min_score must be"),
        ({"namespace": "a", "query": "q"}, ["nonsense"], "unknown kind"),
    ],
)
def test_unusable_requests_say_why(params: dict[str, str], kinds: list[str], message: str) -> None:
    with pytest.raises(BadQuery, match=message):
        SearchQuery.from_params(params, kinds)


def test_a_fix_pattern_lookup_takes_the_error_text_and_the_same_limits() -> None:
    query = FixPatternQuery.from_params(
        {"namespace": "a", "error": "KeyError: 'x'", "limit": "3", "min_score": "0.4"})
    assert (query.error, query.limit, query.min_score) == ("KeyError: 'x'", 3, 0.4)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"error": "boom"}, "namespace is required"),
        ({"namespace": "a", "error": "  "}, "error is required"),
        ({"namespace": "a", "error": "x" * 40000}, "longer than"),
        ({"namespace": "a", "error": "boom", "limit": "0"}, "limit must be between"),
    ],
)
def test_a_fix_pattern_lookup_refuses_bad_parameters(params: dict[str, str], message: str) -> None:
    with pytest.raises(BadQuery, match=message):
        FixPatternQuery.from_params(params)
