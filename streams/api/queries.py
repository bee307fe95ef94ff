"""The read core's queries from a request's parameters: a search's and a context pack's scope,
profile, viewpoint and filters, read by the rules the routes declare (streams/api/params.py),
so that /v1/search, /v1/summary and /v1/context read the same parameter the same way."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, get_args

from memstream_client.events import MemoryType, RecordKind, ReviewState, Tier
from processors.api.parameters import (
    BOOLEAN,
    IDENTIFIER,
    NAMESPACE,
    PLANNING_ITEM,
    REPO,
    SECURITY_SCOPE,
    TAG,
    InvalidValue,
    Rule,
    instant,
    integer,
    number,
    one_of,
    text,
)
from processors.recall.context_pack import SECTIONS, shares_of
from processors.recall.gaps import narrows
from processors.recall.ranking import PROFILES, Profile
from stores.index.protocol import SearchScope
from streams.api.params import (
    AS_OF,
    READER_PARAMS,
    BadQuery,
    Param,
    Params,
    at_most,
    moment,
    optional,
    repeated,
    required,
    value,
)
from streams.plumbing.config import MemoryFlags
from streams.reads.context import MEMORIES, ContextQuery
from streams.reads.fix_patterns import FixPatternQuery
from streams.reads.graph import MAX_DEPTH
from streams.reads.search import DEFAULT_LIMIT, DEFAULT_MIN_SCORE, SearchQuery, Viewpoint

MAX_LIMIT = 100
# As long as a memory's text.
MAX_QUERY_CHARS = 8000
# Related ids one search may name.
MAX_RELATED_IDS = 100
MAX_ERROR_CHARS = 32000
MAX_BUDGET_TOKENS = 32_000

QUERY = text(MAX_QUERY_CHARS)
LIMIT = integer(1, MAX_LIMIT)
MIN_SCORE = number(-1.0, 1.0)
PROFILE = one_of(PROFILES)
KIND = one_of(get_args(RecordKind))
MEMORY_TYPE = one_of(get_args(MemoryType))
TIER = one_of(get_args(Tier))
REVIEW_STATE = one_of(get_args(ReviewState))
CONFIDENCE = number(0.0, 1.0)
EXPAND = integer(0, MAX_DEPTH)
ERROR = text(MAX_ERROR_CHARS)
BUDGET_TOKENS = integer(0, MAX_BUDGET_TOKENS)


def _shares(value: str) -> Mapping[str, float]:
    try:
        return shares_of(value)
    except ValueError as exc:
        raise InvalidValue(str(exc)) from None


SHARES = Rule(_shares, {"type": "string", "description": (
    "each section's share of the budget the core blocks leave, as section=share pairs "
    f"separated by commas (sections: {', '.join(SECTIONS)}; shares in [0, 1], scaled to sum "
    "to 1; a section not named keeps its default)")})

# A search's query, filters and scoring, which a context pack takes too.
SEARCH_FILTERS: Params = {
    **READER_PARAMS, "query": Param(QUERY), "q": Param(QUERY), "profile": Param(PROFILE),
    "run_id": Param(IDENTIFIER), "min_score": Param(MIN_SCORE),
    "kind": Param(KIND, repeats=True), "memory_type": Param(MEMORY_TYPE, repeats=True),
    "tag": Param(TAG, repeats=True), "tier": Param(TIER, repeats=True),
    "review_state": Param(REVIEW_STATE, repeats=True),
    "related_id": Param(IDENTIFIER, repeats=True),
    "since": Param(instant), "until": Param(instant), "explain": Param(BOOLEAN),
    "repo": Param(REPO, repeats=True), "security_scope": Param(SECURITY_SCOPE, repeats=True),
    "as_of": Param(AS_OF), "min_confidence": Param(CONFIDENCE), "expand": Param(EXPAND),
}
SEARCH_PARAMS: Params = {**SEARCH_FILTERS, "limit": Param(LIMIT)}
CONTEXT_PARAMS: Params = {**SEARCH_FILTERS, "budget_tokens": Param(BUDGET_TOKENS),
                          "error": Param(ERROR), "shares": Param(SHARES),
                          "planning_ref": Param(PLANNING_ITEM)}


def search_query(params: Any, agent_id: str | None) -> SearchQuery:
    """A search from the query string (a multidict: repeatable parameters may repeat), for a
    caller who reads `agent_id`'s personal memories (or none)."""
    namespace = required(params, "namespace", NAMESPACE)
    query = query_text(params)
    limit, min_score = limits(params, DEFAULT_LIMIT, DEFAULT_MIN_SCORE)
    profile = profile_of(params)
    scope = scope_of(params, namespace, limit, min_score, profile, agent_id)
    if not query and not scope.related_ids:
        raise BadQuery("query is required (or related_id, to search by related ids)")
    viewpoint = viewpoint_of(params)
    if not query and viewpoint.as_of is not None:
        raise BadQuery("as_of needs a query: a search by related ids alone reads memory "
                       "as it is now")
    return SearchQuery(query, scope, profile, optional(params, "run_id", IDENTIFIER),
                       value(params, "explain", BOOLEAN, False), viewpoint,
                       expand_of(params, profile), narrows(params.keys()))


def context_query(params: Any, flags: MemoryFlags, agent_id: str | None) -> ContextQuery:
    """A context pack from the query string, for a caller who reads `agent_id`'s personal
    memories and core blocks (or none)."""
    namespace = required(params, "namespace", NAMESPACE)
    query = query_text(params)
    if not query:
        raise BadQuery("query is required")
    min_score = value(params, "min_score", MIN_SCORE, DEFAULT_MIN_SCORE)
    profile = profile_of(params)
    planning_ref = optional(params, "planning_ref", PLANNING_ITEM)
    if planning_ref is not None and len(repeated(params, "repo", REPO)) != 1:
        raise BadQuery("planning_ref needs one repo: the repository whose planning holds it")
    return ContextQuery(
        query, scope_of(params, namespace, MEMORIES, min_score, profile, agent_id), profile,
        value(params, "budget_tokens", BUDGET_TOKENS, flags.context_budget_tokens),
        optional(params, "run_id", IDENTIFIER),
        (optional(params, "error", ERROR) or "").strip() or None,
        value(params, "explain", BOOLEAN, False),
        value(params, "shares", SHARES, flags.context_shares), planning_ref,
        viewpoint_of(params), expand_of(params, profile), narrows(params.keys()))


def fix_pattern_query(params: Mapping[str, str]) -> FixPatternQuery:
    namespace = required(params, "namespace", NAMESPACE)
    error = required(params, "error", ERROR,
                     ": the error message or traceback to look up").strip()
    return FixPatternQuery(namespace, error, *limits(params, DEFAULT_LIMIT, DEFAULT_MIN_SCORE))


def query_text(params: Mapping[str, str]) -> str:
    return params.get("query", params.get("q", "")).strip()


def viewpoint_of(params: Mapping[str, str]) -> Viewpoint:
    return Viewpoint(optional(params, "as_of", AS_OF),
                     optional(params, "min_confidence", CONFIDENCE))


def profile_of(params: Mapping[str, str]) -> Profile:
    return PROFILES[value(params, "profile", PROFILE, "default")]


def expand_of(params: Mapping[str, str], profile: Profile) -> int:
    """The hops a recall follows from its best hits: asked, else its profile's."""
    return value(params, "expand", EXPAND, profile.expand_hops)


def scope_of(params: Any, namespace: str, limit: int, min_score: float,
             profile: Profile, agent_id: str | None) -> SearchScope:
    """The scope of a search from its parameters, narrowed by the profile; personal
    memories of `agent_id` only (the caller's key decides which agent, not the request)."""
    kinds = repeated(params, "kind", KIND) or profile.record_kinds
    memory_types = repeated(params, "memory_type", MEMORY_TYPE) or profile.memory_types
    return SearchScope(
        namespace, limit, min_score, tuple(kinds),
        related_ids=tuple(at_most(params, "related_id", IDENTIFIER, MAX_RELATED_IDS)),
        agent_id=agent_id,
        tags=tuple(repeated(params, "tag", TAG)),
        memory_types=tuple(memory_types),
        tiers=tuple(repeated(params, "tier", TIER)),
        review_states=tuple(repeated(params, "review_state", REVIEW_STATE) or ("approved",)),
        since=moment(params, "since"), until=moment(params, "until"),
        repos=tuple(repeated(params, "repo", REPO)),
        security_scopes=tuple(repeated(params, "security_scope", SECURITY_SCOPE)),
    )


def limits(params: Mapping[str, str], limit: int, min_score: float) -> tuple[int, float]:
    """`limit` and `min_score` from the request, with these defaults."""
    return (value(params, "limit", LIMIT, limit),
            value(params, "min_score", MIN_SCORE, min_score))
