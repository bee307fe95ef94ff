"""`GET /v1/fix-patterns`: what fixed this error before (streams/reads/fix_patterns.py): the
fix pattern of the error's very signature first, then the nearest other fix patterns."""

from __future__ import annotations

from typing import Any

from faust.web import Request, Response, View

from processors.api.access import Caller
from stores.index.postgres_search import RecordsSearch
from stores.index.protocol import SearchIndex
from stores.records import FoundRecord
from streams.api.auth import granted_namespace
from streams.api.pages import Pages
from streams.api.params import NAMESPACE_PARAMS, Param, Params
from streams.api.queries import ERROR, LIMIT, MIN_SCORE, fix_pattern_query
from streams.api.rendering import hit_view
from streams.plumbing.runtime import Runtime
from streams.reads.fix_patterns import find_fix_patterns

FIX_PATTERN_PARAMS: Params = {**NAMESPACE_PARAMS, "error": Param(ERROR), "limit": Param(LIMIT),
                              "min_score": Param(MIN_SCORE)}


def wire_fix_patterns(pages: Pages, runtime: Runtime, index: SearchIndex,
                      fallback: RecordsSearch) -> None:
    @pages.page("/v1/fix-patterns", params=FIX_PATTERN_PARAMS)
    async def fix_patterns_view(web: View, request: Request, caller: Caller) -> Response:
        granted_namespace(caller, request.query)
        found = await find_fix_patterns(runtime, index, fallback,
                                        fix_pattern_query(request.query))
        signature = found.signature
        return web.json({
            "namespace": found.namespace,
            "signature": {
                "signature_id": signature.signature_id,
                "dialect": signature.dialect,
                "exception_type": signature.exception_type,
                "template": signature.template,
                "frames": list(signature.frames),
            },
            "degraded": found.degraded,
            "fix_patterns": [
                {**_pattern(record, None), "match": "exact"} for record in found.exact
            ] + [
                {**_pattern(hit.record, hit_view(hit)["score"]), "match": "similar"}
                for hit in found.similar
            ],
        })


def _pattern(record: FoundRecord, score: float | None) -> dict[str, Any]:
    return {"record_id": record.record_id, "kind": record.record_kind, "title": record.title,
            "text": record.text, "score": score, "created_at": record.created_at.isoformat(),
            "source_ref": record.source_ref, "scope": record.scope, "tags": list(record.tags),
            "related_ids": list(record.related_ids), "version": record.version,
            **record.body}
