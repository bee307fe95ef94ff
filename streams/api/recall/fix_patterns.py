"""`GET /v1/fix-patterns`: what fixed this error before (streams/reads/fix_patterns.py): the
fix pattern of the error's very signature first, then the nearest other fix patterns."""

from __future__ import annotations

from faust.web import Request, View

from memstream_client.answers.recall import ErrorSignature, FixPattern, FixPatterns
from processors.api.access import Caller
from stores.index.postgres_search import RecordsSearch
from stores.index.protocol import SearchIndex
from stores.records import FoundRecord
from streams.api.auth import granted_namespace
from streams.api.pages import Pages
from streams.api.params import NAMESPACE_PARAMS, Param, Params
from streams.api.queries import ERROR, LIMIT, MIN_SCORE, fix_pattern_query
from streams.plumbing.runtime import Runtime
from streams.reads.fix_patterns import find_fix_patterns

FIX_PATTERN_PARAMS: Params = {**NAMESPACE_PARAMS, "error": Param(ERROR), "limit": Param(LIMIT),
                              "min_score": Param(MIN_SCORE)}


def wire_fix_patterns(pages: Pages, runtime: Runtime, index: SearchIndex,
                      fallback: RecordsSearch) -> None:
    @pages.page("/v1/fix-patterns", params=FIX_PATTERN_PARAMS, answer=FixPatterns)
    async def fix_patterns_view(web: View, request: Request, caller: Caller) -> FixPatterns:
        """What fixed this error before: its signature's fix pattern, then similar ones."""
        granted_namespace(caller, request.query)
        found = await find_fix_patterns(runtime, index, fallback,
                                        fix_pattern_query(request.query))
        signature = found.signature
        return FixPatterns(
            namespace=found.namespace,
            signature=ErrorSignature(signature_id=signature.signature_id,
                                     dialect=signature.dialect,
                                     exception_type=signature.exception_type,
                                     template=signature.template,
                                     frames=list(signature.frames)),
            degraded=found.degraded,
            fix_patterns=[pattern_answer(record, "exact", None) for record in found.exact] + [
                pattern_answer(hit.record, "similar", round(hit.score, 4))
                for hit in found.similar])


def pattern_answer(record: FoundRecord, match: str, score: float | None) -> FixPattern:
    body = record.body
    return FixPattern(
        record_id=record.record_id, match=match, kind=record.record_kind, title=record.title,
        text=record.text, score=score, created_at=record.created_at,
        source_ref=record.source_ref, scope=record.scope, tags=list(record.tags),
        related_ids=list(record.related_ids), version=record.version,
        signature_id=body.get("signature_id"), dialect=body.get("dialect"),
        exception_type=body.get("exception_type"), template=body.get("template"),
        frames=list(body.get("frames", ())), example=body.get("example"),
        occurrences=dict(body.get("occurrences", {})), fixes=list(body.get("fixes", ())),
        success_count=int(body.get("success_count", 0)))
