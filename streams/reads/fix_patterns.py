"""What fixed this error before: the error text's signature, computed as the pipeline
computes it, names the fix pattern of the very same signature; the nearest other fix patterns
by meaning follow it."""

from __future__ import annotations

from dataclasses import dataclass

from memstream_client.ids import fix_pattern_record_id
from processors.recall.ranking import PROFILES
from processors.runs.fix_patterns import error_signature, fix_pattern_title
from processors.runs.signatures import ErrorSignature
from stores.index.postgres_search import RecordsSearch
from stores.index.protocol import SearchIndex, SearchScope
from stores.records import FoundRecord
from streams.plumbing.runtime import Runtime
from streams.reads.search import DEFAULT_LIMIT, DEFAULT_MIN_SCORE, Hit, hybrid_search


@dataclass(frozen=True)
class FixPatternQuery:
    namespace: str
    error: str
    limit: int = DEFAULT_LIMIT
    min_score: float = DEFAULT_MIN_SCORE


@dataclass(frozen=True)
class FixPatternsFound:
    """The error's signature, the fix pattern of that very signature if there is one, and the
    fix patterns most like it (`degraded`: the index failed and Postgres answered)."""

    namespace: str
    signature: ErrorSignature
    exact: list[FoundRecord]
    similar: list[Hit]
    degraded: bool


async def find_fix_patterns(runtime: Runtime, index: SearchIndex, fallback: RecordsSearch,
                            query: FixPatternQuery) -> FixPatternsFound:
    signature = error_signature(query.error)
    exact_id = fix_pattern_record_id(query.namespace, signature.signature_id)
    # One more than asked: the exact match may be among the nearest.
    found = await hybrid_search(runtime, index, fallback, fix_pattern_title(signature),
                                SearchScope(query.namespace, query.limit + 1, query.min_score,
                                            record_kinds=("fix_pattern",)),
                                PROFILES["default"])
    similar = [hit for hit in found.hits if hit.record.record_id != exact_id][: query.limit]
    exact = await runtime.stores.records.records_by_id(query.namespace, [exact_id])
    return FixPatternsFound(query.namespace, signature, list(exact.values()), similar,
                            found.degraded)
