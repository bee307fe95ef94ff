"""`GET /v1/fix-patterns`: what fixed this error before.

The error text's signature is computed as the pipeline computes it, so the fix pattern of
the very same signature comes first; then the nearest other fix patterns by meaning.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from processors.fix_patterns import error_signature, fix_pattern_title
from processors.ids import fix_pattern_record_id
from stores.vector_index import SearchScope, VectorIndex
from streams.runtime import Runtime
from streams.search import (
    DEFAULT_LIMIT,
    DEFAULT_MIN_SCORE,
    BadQuery,
    hit,
    limits,
    nearest,
    required,
)

MAX_ERROR_CHARS = 32000


@dataclass(frozen=True)
class FixPatternQuery:
    namespace: str
    error: str
    limit: int = DEFAULT_LIMIT
    min_score: float = DEFAULT_MIN_SCORE

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> FixPatternQuery:
        namespace = required(params, "namespace")
        error = required(params, "error", ": the error message or traceback to look up")
        if len(error) > MAX_ERROR_CHARS:
            raise BadQuery(f"error is longer than {MAX_ERROR_CHARS} characters")
        return cls(namespace, error, *limits(params, cls.limit, cls.min_score))


async def find_fix_patterns(runtime: Runtime, index: VectorIndex,
                            query: FixPatternQuery) -> dict[str, Any]:
    signature = error_signature(query.error)
    exact_id = fix_pattern_record_id(query.namespace, signature.signature_id)
    title = fix_pattern_title(signature)
    vector = (await runtime.embed([title]))[0]
    # One more than asked: the exact match may be among the nearest.
    found = await nearest(runtime, index, vector, SearchScope(
        query.namespace, query.limit + 1, query.min_score, record_kinds=("fix_pattern",),
    ))
    similar = [(rid, score) for rid, score in found.scored if rid != exact_id][: query.limit]
    rows = await runtime.repository.records_by_id(
        query.namespace, [exact_id, *(rid for rid, _ in similar)]
    )
    matches = [(exact_id, "exact", None)] + [(rid, "similar", s) for rid, s in similar]
    return {
        "namespace": query.namespace,
        "signature": {
            "signature_id": signature.signature_id,
            "dialect": signature.dialect,
            "exception_type": signature.exception_type,
            "template": signature.template,
            "frames": list(signature.frames),
        },
        "degraded": found.degraded,
        "fix_patterns": [
            {**hit(rows[rid], score), "match": match, "version": rows[rid]["version"],
             **rows[rid]["body"]}
            for rid, match, score in matches
            if rid in rows
        ],
    }
