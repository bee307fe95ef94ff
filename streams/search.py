"""`GET /v1/search`: semantic search within one namespace, with Postgres as the fallback
when the index is unreachable (the answer then says `degraded`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stores.repository import Vector
from stores.vector_index import SearchScope, VectorIndex
from streams.runtime import Runtime

log = logging.getLogger(__name__)

MAX_LIMIT = 100
DEFAULT_LIMIT = 5
DEFAULT_MIN_SCORE = 0.5
RECORD_KINDS = frozenset({"run_digest", "memory", "fix_pattern"})


class BadQuery(ValueError):
    """The request's parameters are unusable; the message says which and why."""


@dataclass(frozen=True)
class SearchQuery:
    query: str
    scope: SearchScope

    @classmethod
    def from_params(cls, params: Mapping[str, str], kinds: list[str]) -> SearchQuery:
        namespace = required(params, "namespace")
        query = params.get("query", params.get("q", "")).strip()
        if not query:
            raise BadQuery("query is required")
        limit, min_score = limits(params, DEFAULT_LIMIT, DEFAULT_MIN_SCORE)
        wanted = tuple(dict.fromkeys(k for item in kinds for k in item.split(",") if k))
        unknown = set(wanted) - RECORD_KINDS
        if unknown:
            raise BadQuery(f"unknown kind {sorted(unknown)}; known: {sorted(RECORD_KINDS)}")
        # Personal memories are returned to their owner (agent_id) only.
        return cls(query, SearchScope(
            namespace, limit, min_score, wanted, params.get("related_id") or None,
            params.get("agent_id") or None,
        ))


@dataclass(frozen=True)
class Nearest:
    scored: list[tuple[str, float]]
    # True when the index failed and Postgres answered.
    degraded: bool


async def nearest(runtime: Runtime, index: VectorIndex, vector: Vector,
                  scope: SearchScope) -> Nearest:
    """The nearest records within `scope` from the index, or from Postgres when the index
    fails."""
    try:
        hits = await index.search(vector, scope)
        return Nearest([(hit.record_id, hit.score) for hit in hits], degraded=False)
    except Exception:
        # Fail open: memory must never make its caller fail while Postgres can answer.
        log.exception("index search failed; answering from Postgres")
    return Nearest(await runtime.repository.vector_search(vector, scope), degraded=True)


def hit(row: Mapping[str, Any], score: float | None) -> dict[str, Any]:
    """A record as search answers show it."""
    return {
        "record_id": row["record_id"],
        "kind": row["record_kind"],
        "title": row["title"],
        "text": row["text"],
        "score": None if score is None else round(score, 4),
        "created_at": row["created_at"].isoformat(),
        "source_ref": row["source_ref"],
        "scope": row["scope"],
        "tags": list(row["tags"]),
        "related_ids": list(row["related_ids"]),
    }


def required(params: Mapping[str, str], name: str, what: str = "") -> str:
    value = params.get(name, "").strip()
    if not value:
        raise BadQuery(f"{name} is required{what}")
    return value


def limits(params: Mapping[str, str], limit: int, min_score: float) -> tuple[int, float]:
    """`limit` and `min_score` from the request, checked, with these defaults."""
    try:
        limit = int(params.get("limit", limit))
        min_score = float(params.get("min_score", min_score))
    except ValueError as exc:
        raise BadQuery(f"limit and min_score must be numbers: {exc}") from None
    if not 1 <= limit <= MAX_LIMIT:
        raise BadQuery(f"limit must be between 1 and {MAX_LIMIT}")
    if not -1.0 <= min_score <= 1.0:
        raise BadQuery("min_score must be between -1 and 1")
    return limit, min_score


async def search(runtime: Runtime, index: VectorIndex, query: SearchQuery) -> dict[str, Any]:
    vector = (await runtime.embed([query.query]))[0]
    found = await nearest(runtime, index, vector, query.scope)
    rows = await runtime.repository.records_by_id(
        query.scope.namespace, [rid for rid, _ in found.scored]
    )
    return {
        "namespace": query.scope.namespace,
        "query": query.query,
        "degraded": found.degraded,
        "hits": [
            hit(rows[record_id], score)
            for record_id, score in found.scored
            # A point whose record is gone from Postgres is stale: the index is rebuildable.
            if record_id in rows
        ],
    }
