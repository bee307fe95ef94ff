"""Search over the records in Postgres: the fallback when the index is unreachable.

It answers the same three questions as an index (`SearchIndex`: dense nearest, lexical best,
term counts) over the records the index would hold (neither superseded nor expired), with the
same visibility rules and filters, exactly (no approximate graph). Hybrid search then runs
the same algorithm over it as over the index, so the degraded answer ranks like the live one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import get_args

import asyncpg

from memstream_client.events import ReviewState
from processors.text.embedding import Vector
from processors.text.lexical import SparseVector
from stores.index.pgvector import scope_args, search_hits
from stores.index.protocol import DIM, IndexHit, SearchIndex, SearchScope, TermCounts, as_vector
from stores.postgres.rows import create_pool


# The records an index holds: neither superseded, expired nor invalidated; deprecated ones
# too, which search leaves out unless asked for them (the stream and stores.index.reindex keep
# this rule).
def in_index(alias: str = "") -> str:
    """The condition a record (of table alias `alias`) meets while the index holds it."""
    column = f"{alias}." if alias else ""
    return (f"{column}superseded_by IS NULL AND {column}expired_at IS NULL"
            f" AND {column}invalidated_by IS NULL")


INDEXED = in_index()


def _scope_sql(among: str, unexpired_at: str) -> str:
    """A record within a SearchScope ($1 is the query, or the limit of a search that has none;
    see scope_args for $2-$14; a record of no repo is the namespace's, read by every repo),
    among `among`, not expired at `unexpired_at`."""
    return f"""
    namespace = $2 AND {among}
    AND ($3::text[] IS NULL OR record_kind = ANY($3))
    AND ($4::text[] IS NULL OR related_ids && $4)
    AND (scope = 'shared' OR agent_id = $5)
    AND (expires_at IS NULL OR expires_at > {unexpired_at})
    AND ($7::text[] IS NULL OR tags && $7)
    AND ($8::text[] IS NULL OR record_kind <> 'memory' OR memory_type = ANY($8))
    AND ($9::text[] IS NULL OR tier = ANY($9))
    AND review_state = ANY($10)
    AND ($11::float8 IS NULL OR created_at >= to_timestamp($11))
    AND ($12::float8 IS NULL OR created_at <= to_timestamp($12))
    AND ($13::text[] IS NULL OR repo IS NULL OR repo = ANY($13))
    AND ($14::text[] IS NULL OR security_scope = ANY($14))
"""


RECORD_SCOPE = _scope_sql(INDEXED, "to_timestamp($6)")
# The records that left the index (merged, expired or invalidated: their last change) after
# the moment $17 (epoch seconds), stored by then and not expired by then: maybe in force
# then, and in no index now.
DEPARTED = """(superseded_by IS NOT NULL OR expired_at IS NOT NULL OR invalidated_by IS NOT NULL)
    AND updated_at > to_timestamp($17) AND stored_at <= to_timestamp($17)"""
DEPARTED_SCOPE = _scope_sql(DEPARTED, "to_timestamp(LEAST($6, $17))")


class RecordsSearch:
    def __init__(self, pool: asyncpg.Pool, dim: int = DIM, *,
                 departed_after: float | None = None) -> None:
        self._pool = pool
        self._dim = dim
        # None: the records an index holds; a moment: those that left it since (as_of).
        self._scope_sql = RECORD_SCOPE if departed_after is None else DEPARTED_SCOPE
        self._moment = () if departed_after is None else (departed_after,)

    def departed_after(self, moment: float) -> RecordsSearch:
        """The same search over the records that left the index after `moment`."""
        return RecordsSearch(self._pool, self._dim, departed_after=moment)

    @classmethod
    async def connect(cls, dsn: str) -> RecordsSearch:
        return cls(await create_pool(dsn))

    async def close(self) -> None:
        await self._pool.close()

    async def search(self, vector: Vector, scope: SearchScope) -> list[IndexHit]:
        rows = await self._pool.fetch(
            f"""
            SELECT record_id, 1 - (embedding <=> $1) AS score FROM records
            WHERE {self._scope_sql} AND embedding IS NOT NULL AND 1 - (embedding <=> $1) >= $16
            ORDER BY embedding <=> $1, record_id LIMIT $15
            """,
            as_vector(vector, self._dim), *scope_args(scope), scope.limit, scope.min_score,
            *self._moment,
        )
        return search_hits(rows)

    async def search_lexical(self, query: SparseVector, scope: SearchScope) -> list[IndexHit]:
        if not query:
            return []
        rows = await self._pool.fetch(
            f"""
            SELECT record_id, -(lexical <#> $1) AS score FROM records
            WHERE {self._scope_sql} AND lexical_terms && $15::integer[]
            ORDER BY lexical <#> $1, record_id LIMIT $16
            """,
            query, *scope_args(scope), list(query.indices), scope.limit, *self._moment,
        )
        return search_hits(rows)

    async def term_counts(self, namespace: str, term_ids: Sequence[int]) -> TermCounts:
        documents: int = await self._pool.fetchval(
            f"SELECT count(*) FROM records WHERE namespace = $1 AND {INDEXED}", namespace)
        rows = await self._pool.fetch(
            f"""
            SELECT term, count(*) AS n FROM records, unnest(lexical_terms) AS term
            WHERE namespace = $1 AND {INDEXED} AND lexical_terms && $2::integer[]
              AND term = ANY($2::integer[])
            GROUP BY term
            """,
            namespace, list(term_ids))
        counted = {int(row["term"]): int(row["n"]) for row in rows}
        return TermCounts(documents, {term: counted.get(term, 0) for term in term_ids})


# Every review state: a search as of a moment asks the index for all of them, since the
# state that counts is the one a record had then (the record reader filters on it).
ALL_REVIEW_STATES: tuple[str, ...] = get_args(ReviewState)


class AsOfSearch:
    """A search of memory as it stood at `moment` (epoch seconds): the records `index` holds
    that occurred by then, beside those that left it since (`departed`, from
    RecordsSearch.departed_after), best first. Which of them were in force then, and as
    what, is for the record reader to say (Records.records_as_of)."""

    def __init__(self, index: SearchIndex, departed: SearchIndex, moment: float) -> None:
        self._index = index
        self._departed = departed
        self._moment = moment

    def _then(self, scope: SearchScope) -> SearchScope:
        until = self._moment if scope.until is None else min(scope.until, self._moment)
        return replace(scope, until=until, review_states=ALL_REVIEW_STATES)

    async def search(self, vector: Vector, scope: SearchScope) -> list[IndexHit]:
        then = self._then(scope)
        return _best(scope.limit, *await asyncio.gather(
            self._index.search(vector, then), self._departed.search(vector, then)))

    async def search_lexical(self, query: SparseVector, scope: SearchScope) -> list[IndexHit]:
        then = self._then(scope)
        return _best(scope.limit, *await asyncio.gather(
            self._index.search_lexical(query, then), self._departed.search_lexical(query, then)))

    async def term_counts(self, namespace: str, term_ids: Sequence[int]) -> TermCounts:
        return await self._index.term_counts(namespace, term_ids)


def _best(limit: int, *lists: Sequence[IndexHit]) -> list[IndexHit]:
    """The `limit` best of several lists of hits, each record once."""
    merged: dict[str, IndexHit] = {}
    for hit in (hit for hits in lists for hit in hits):
        if hit.record_id not in merged or hit.score > merged[hit.record_id].score:
            merged[hit.record_id] = hit
    return sorted(merged.values(), key=lambda hit: (-hit.score, hit.record_id))[:limit]
