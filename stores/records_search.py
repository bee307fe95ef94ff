"""Search over the records in Postgres: the fallback when the index is unreachable.

It answers the same three questions as an index (`SearchIndex`: dense nearest, lexical best,
term counts) over the records the index would hold (neither superseded nor expired), with the
same visibility rules and filters, exactly (no approximate graph). Hybrid search then runs
the same algorithm over it as over the index, so the degraded answer ranks like the live one.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from processors.lexical import SparseVector
from stores.pg_index import scope_args
from stores.postgres_rows import create_pool
from stores.vector_index import DIM, IndexHit, SearchScope, TermCounts, Vector, as_vector

# The records an index holds: neither superseded nor expired; deprecated ones too, which
# search leaves out unless asked for them (the stream and stores.reindex keep this rule).
INDEXED = "superseded_by IS NULL AND expired_at IS NULL"
# A record within a SearchScope ($1 is the query, or the limit of a search that has none;
# see scope_args for $2-$14; a record of no repo is the namespace's, read by every repo).
RECORD_SCOPE = f"""
    namespace = $2 AND {INDEXED}
    AND ($3::text[] IS NULL OR record_kind = ANY($3))
    AND ($4::text[] IS NULL OR related_ids && $4)
    AND (scope = 'shared' OR agent_id = $5)
    AND (expires_at IS NULL OR expires_at > to_timestamp($6))
    AND ($7::text[] IS NULL OR tags && $7)
    AND ($8::text[] IS NULL OR record_kind <> 'memory' OR memory_type = ANY($8))
    AND ($9::text[] IS NULL OR tier = ANY($9))
    AND review_state = ANY($10)
    AND ($11::float8 IS NULL OR created_at >= to_timestamp($11))
    AND ($12::float8 IS NULL OR created_at <= to_timestamp($12))
    AND ($13::text[] IS NULL OR repo IS NULL OR repo = ANY($13))
    AND ($14::text[] IS NULL OR security_scope = ANY($14))
"""


class RecordsSearch:
    def __init__(self, pool: asyncpg.Pool, dim: int = DIM) -> None:
        self._pool = pool
        self._dim = dim

    @classmethod
    async def connect(cls, dsn: str) -> RecordsSearch:
        return cls(await create_pool(dsn))

    async def close(self) -> None:
        await self._pool.close()

    async def search(self, vector: Vector, scope: SearchScope) -> list[IndexHit]:
        rows = await self._pool.fetch(
            f"""
            SELECT record_id, 1 - (embedding <=> $1) AS score FROM records
            WHERE {RECORD_SCOPE} AND embedding IS NOT NULL AND 1 - (embedding <=> $1) >= $16
            ORDER BY embedding <=> $1, record_id LIMIT $15
            """,
            as_vector(vector, self._dim), *scope_args(scope), scope.limit, scope.min_score,
        )
        return _hits(rows)

    async def search_lexical(self, query: SparseVector, scope: SearchScope) -> list[IndexHit]:
        if not query:
            return []
        rows = await self._pool.fetch(
            f"""
            SELECT record_id, -(lexical <#> $1) AS score FROM records
            WHERE {RECORD_SCOPE} AND lexical_terms && $15::integer[]
            ORDER BY lexical <#> $1, record_id LIMIT $16
            """,
            query, *scope_args(scope), list(query.indices), scope.limit,
        )
        return _hits(rows)

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


def _hits(rows: Sequence[asyncpg.Record]) -> list[IndexHit]:
    return [IndexHit(row["record_id"], float(row["score"]), {"record_id": row["record_id"]})
            for row in rows]
