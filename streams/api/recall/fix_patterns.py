"""`GET /v1/fix-patterns`: what fixed this error before.

The error text's signature is computed as the pipeline computes it, so the fix pattern of
the very same signature comes first; then the nearest other fix patterns by meaning.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from faust.web import Request, Response, View

from processors.api.access import Caller
from processors.api.parameters import NAMESPACE, text
from processors.events.ids import fix_pattern_record_id
from processors.recall.ranking import PROFILES
from processors.runs.fix_patterns import error_signature, fix_pattern_title
from stores.index.postgres_search import RecordsSearch
from stores.index.protocol import SearchIndex, SearchScope
from stores.records import FoundRecord
from streams.api.auth import granted_namespace
from streams.api.pages import Pages
from streams.api.params import NAMESPACE_PARAMS, Param, Params, required
from streams.api.recall.search import (
    DEFAULT_LIMIT,
    DEFAULT_MIN_SCORE,
    LIMIT,
    MIN_SCORE,
    hit_view,
    hybrid_search,
    limits,
)
from streams.plumbing.runtime import Runtime

MAX_ERROR_CHARS = 32000
ERROR = text(MAX_ERROR_CHARS)
FIX_PATTERN_PARAMS: Params = {**NAMESPACE_PARAMS, "error": Param(ERROR), "limit": Param(LIMIT),
                              "min_score": Param(MIN_SCORE)}


def wire_fix_patterns(pages: Pages, runtime: Runtime, index: SearchIndex,
                      fallback: RecordsSearch) -> None:
    @pages.page("/v1/fix-patterns", params=FIX_PATTERN_PARAMS)
    async def fix_patterns_view(web: View, request: Request, caller: Caller) -> Response:
        granted_namespace(caller, request.query)
        query = FixPatternQuery.from_params(request.query)
        return web.json(await find_fix_patterns(runtime, index, fallback, query))


@dataclass(frozen=True)
class FixPatternQuery:
    namespace: str
    error: str
    limit: int = DEFAULT_LIMIT
    min_score: float = DEFAULT_MIN_SCORE

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> FixPatternQuery:
        namespace = required(params, "namespace", NAMESPACE)
        error = required(params, "error", ERROR,
                         ": the error message or traceback to look up").strip()
        return cls(namespace, error, *limits(params, cls.limit, cls.min_score))


async def find_fix_patterns(runtime: Runtime, index: SearchIndex, fallback: RecordsSearch,
                            query: FixPatternQuery) -> dict[str, Any]:
    signature = error_signature(query.error)
    exact_id = fix_pattern_record_id(query.namespace, signature.signature_id)
    title = fix_pattern_title(signature)
    # One more than asked: the exact match may be among the nearest.
    found = await hybrid_search(runtime, index, fallback, title, SearchScope(
        query.namespace, query.limit + 1, query.min_score, record_kinds=("fix_pattern",),
    ), PROFILES["default"])
    similar = [hit for hit in found.hits if hit.record.record_id != exact_id][: query.limit]
    exact = await runtime.stores.records.records_by_id(query.namespace, [exact_id])
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
            {**_pattern(record, None), "match": "exact"} for record in exact.values()
        ] + [
            {**_pattern(hit.record, hit_view(hit)["score"]), "match": "similar"}
            for hit in similar
        ],
    }


def _pattern(record: FoundRecord, score: float | None) -> dict[str, Any]:
    return {"record_id": record.record_id, "kind": record.record_kind, "title": record.title,
            "text": record.text, "score": score, "created_at": record.created_at.isoformat(),
            "source_ref": record.source_ref, "scope": record.scope, "tags": list(record.tags),
            "related_ids": list(record.related_ids), "version": record.version,
            **record.body}
