"""The index in Postgres itself: pgvector with an HNSW graph, one table per collection.

Any number of worker processes may share it (the embedded edge engine admits one), so it is
the index of scaled-out deployments that have no Qdrant server, and of the two-worker tests.
It keeps the same contract as the Qdrant backends: one point per live record, a point id
derived from the record id, the payload stored whole, the same filters; and like them it can
be rebuilt from the records (stores.index.reindex).

    pg://                              the records' own database (MEMSTREAM_PG_DSN)
    postgresql://user@host/db          another database

Searches scan the HNSW graph iteratively (pgvector's `hnsw.iterative_scan`), so that a
namespace filter does not starve the result of candidates; small namespaces are planned as a
scan of the namespace's rows, which is exact.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import asyncpg

from processors.text.embedding import Vector
from processors.text.lexical import SparseVector
from stores.index.protocol import (
    DEFAULT_COLLECTION,
    DIM,
    IndexHit,
    IndexPoint,
    SearchScope,
    TermCounts,
    as_vector,
    point_id,
    prepare_points,
    search_hit,
)
from stores.postgres.codecs import register_codecs
from stores.postgres.rows import keep_session

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,40}$")
# Serialises the creation of the table by workers that start together.
_CREATE_LOCK_KEY = 0x6D656D696E647831  # "memindx1"


class PostgresIndexError(RuntimeError):
    """The table exists with another dimension, or the index is closed."""


class PostgresIndex:
    def __init__(self, dsn: str, *, collection: str = DEFAULT_COLLECTION,
                 dim: int = DIM) -> None:
        if not _IDENTIFIER.match(collection):
            raise ValueError(f"collection {collection!r}: lower-case letters, digits and _")
        self._dsn = dsn
        self._table = f"vector_index_{collection}"
        self._dim = dim
        self._pool: asyncpg.Pool | None = None

    async def ensure_collection(self) -> None:
        if self._pool is not None:
            return
        connection = await asyncpg.connect(self._dsn)
        try:
            await connection.execute("SELECT pg_advisory_lock($1)", _CREATE_LOCK_KEY)
            try:
                await connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
                await connection.execute(self._schema())
            finally:
                await connection.execute("SELECT pg_advisory_unlock($1)", _CREATE_LOCK_KEY)
            stored = await connection.fetchval(
                "SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
                " WHERE attrelid = $1::regclass AND attname = 'embedding'", self._table)
        finally:
            await connection.close()
        if stored != f"vector({self._dim})":
            raise PostgresIndexError(
                f"{self._table} holds {stored}, not vector({self._dim}): another dimension")
        self._pool = await asyncpg.create_pool(
            self._dsn, min_size=1, max_size=4, init=register_codecs, reset=keep_session,
            # Keep scanning the graph until `limit` rows pass the filters; a wider beam than
            # the default 40 for recall at 100k points.
            server_settings={"hnsw.iterative_scan": "relaxed_order", "hnsw.ef_search": "100"})

    def _schema(self) -> str:
        table = self._table
        return f"""
        CREATE TABLE IF NOT EXISTS {table} (
            point_id     uuid PRIMARY KEY,
            record_id    text NOT NULL,
            namespace    text NOT NULL,
            record_kind  text NOT NULL,
            scope        text NOT NULL,
            agent_id     text,
            related_ids  text[] NOT NULL,
            tags         text[] NOT NULL,
            memory_type  text,
            tier         text,
            review_state text NOT NULL,
            created_at   double precision NOT NULL,
            expires_at   double precision,
            payload      jsonb NOT NULL,
            embedding    vector({self._dim}) NOT NULL,
            lexical      sparsevec NOT NULL,
            terms        integer[] NOT NULL
        );
        CREATE INDEX IF NOT EXISTS {table}_namespace ON {table} (namespace, record_id);
        CREATE INDEX IF NOT EXISTS {table}_hnsw ON {table}
            USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64);
        CREATE INDEX IF NOT EXISTS {table}_terms ON {table} USING gin (terms);
        """

    def _open_pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise PostgresIndexError(f"{self._table}: call ensure_collection() first (or closed)")
        return self._pool

    async def upsert(self, points: Sequence[IndexPoint]) -> None:
        prepared = prepare_points(points, self._dim)
        if not prepared:
            return
        await self._open_pool().executemany(
            f"""
            INSERT INTO {self._table} (point_id, record_id, namespace, record_kind, scope,
                                       agent_id, related_ids, tags, memory_type, tier,
                                       review_state, created_at, expires_at, payload,
                                       embedding, lexical, terms)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
                    $17)
            ON CONFLICT (point_id) DO UPDATE SET
                record_id = excluded.record_id, namespace = excluded.namespace,
                record_kind = excluded.record_kind, scope = excluded.scope,
                agent_id = excluded.agent_id, related_ids = excluded.related_ids,
                tags = excluded.tags, memory_type = excluded.memory_type,
                tier = excluded.tier, review_state = excluded.review_state,
                created_at = excluded.created_at, expires_at = excluded.expires_at,
                payload = excluded.payload, embedding = excluded.embedding,
                lexical = excluded.lexical, terms = excluded.terms
            """,
            [
                (p.id, p.payload["record_id"], p.payload["namespace"],
                 str(p.payload.get("record_kind", "")), str(p.payload.get("scope", "shared")),
                 p.payload.get("agent_id"), list(p.payload.get("related_ids") or []),
                 list(p.payload.get("tags") or []), p.payload.get("memory_type"),
                 p.payload.get("tier"), str(p.payload.get("review_state", "approved")),
                 float(p.payload.get("created_at") or 0.0), p.payload.get("expires_at"),
                 # The term ids have a column of their own; hits leave them out.
                 {k: v for k, v in p.payload.items() if k != "terms"}, p.vector, p.lexical,
                 list(p.lexical.indices))
                for p in prepared
            ],
        )

    async def delete(self, record_ids: Sequence[str]) -> None:
        if not record_ids:
            return
        await self._open_pool().execute(
            f"DELETE FROM {self._table} WHERE point_id = ANY($1::uuid[])",
            [point_id(record_id) for record_id in record_ids])

    async def search(self, vector: Vector, scope: SearchScope) -> list[IndexHit]:
        rows = await self._open_pool().fetch(
            f"""
            SELECT record_id, score FROM (
                SELECT record_id, 1 - (embedding <=> $1) AS score FROM {self._table}
                WHERE {_SCOPE}
                ORDER BY embedding <=> $1 LIMIT $15) AS nearest
            WHERE score >= $16
            ORDER BY score DESC
            """,
            as_vector(vector, self._dim), *scope_args(scope), scope.limit, scope.min_score,
        )
        return search_hits(rows)

    async def nearest(self, vector: Vector, namespace: str, limit: int,
                      min_score: float) -> list[IndexHit]:
        rows = await self._open_pool().fetch(
            f"""
            SELECT payload, score FROM (
                SELECT payload, 1 - (embedding <=> $1) AS score FROM {self._table}
                WHERE namespace = $2
                ORDER BY embedding <=> $1 LIMIT $3) AS nearest
            WHERE score >= $4
            ORDER BY score DESC
            """,
            as_vector(vector, self._dim), namespace, limit, min_score,
        )
        return _hits(rows)

    async def search_lexical(self, query: SparseVector, scope: SearchScope) -> list[IndexHit]:
        if not query:
            return []
        # Exact: the namespace's rows holding a query term (the GIN index), scored in full.
        rows = await self._open_pool().fetch(
            f"""
            SELECT record_id, -(lexical <#> $1) AS score FROM {self._table}
            WHERE {_SCOPE} AND terms && $15::integer[]
            ORDER BY lexical <#> $1, record_id LIMIT $16
            """,
            query, *scope_args(scope), list(query.indices), scope.limit,
        )
        return search_hits(rows)

    async def maintain(self, min_changes: int) -> bool:
        # Postgres keeps the HNSW graph up to date on every write, and vacuums by itself.
        return False

    async def term_counts(self, namespace: str, term_ids: Sequence[int]) -> TermCounts:
        pool = self._open_pool()
        documents: int = await pool.fetchval(
            f"SELECT count(*) FROM {self._table} WHERE namespace = $1", namespace)
        rows = await pool.fetch(
            f"""
            SELECT term, count(*) AS n FROM {self._table}, unnest(terms) AS term
            WHERE namespace = $1 AND terms && $2::integer[] AND term = ANY($2::integer[])
            GROUP BY term
            """,
            namespace, list(term_ids))
        counted = {int(row["term"]): int(row["n"]) for row in rows}
        return TermCounts(documents, {term: counted.get(term, 0) for term in term_ids})

    async def count(self, namespace: str | None = None) -> int:
        count: int = await self._open_pool().fetchval(
            f"SELECT count(*) FROM {self._table} WHERE $1::text IS NULL OR namespace = $1",
            namespace)
        return count

    async def iter_record_ids(
        self, namespace: str | None = None, batch_size: int = 1024
    ) -> AsyncIterator[list[str]]:
        after = ""
        while True:
            rows = await self._open_pool().fetch(
                f"SELECT record_id FROM {self._table}"
                " WHERE ($1::text IS NULL OR namespace = $1) AND record_id > $2"
                " ORDER BY record_id LIMIT $3",
                namespace, after, batch_size)
            if not rows:
                return
            yield [row["record_id"] for row in rows]
            after = rows[-1]["record_id"]

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()


# A point within a SearchScope: its namespace, kinds, related ids, visibility and filters
# ($1 is the query vector; see scope_args for $2-$14).
_SCOPE = """
    namespace = $2
    AND ($3::text[] IS NULL OR record_kind = ANY($3))
    AND ($4::text[] IS NULL OR related_ids && $4)
    AND (scope = 'shared' OR agent_id = $5)
    AND (expires_at IS NULL OR expires_at > $6)
    AND ($7::text[] IS NULL OR tags && $7)
    AND ($8::text[] IS NULL OR record_kind <> 'memory' OR memory_type = ANY($8))
    AND ($9::text[] IS NULL OR tier = ANY($9))
    AND review_state = ANY($10)
    AND ($11::float8 IS NULL OR created_at >= $11)
    AND ($12::float8 IS NULL OR created_at <= $12)
    AND ($13::text[] IS NULL OR payload->>'repo' = ANY($13))
    AND ($14::text[] IS NULL OR payload->>'security_scope' = ANY($14))
"""


def scope_args(scope: SearchScope) -> tuple[Any, ...]:
    """The arguments $2-$14 of a scope filter over Postgres (this index's, and the records'
    own in stores/index/postgres_search.py, which names its columns alike)."""
    return (scope.namespace, list(scope.record_kinds) or None, list(scope.related_ids) or None,
            scope.agent_id, time.time(), list(scope.tags) or None,
            list(scope.memory_types) or None, list(scope.tiers) or None,
            list(scope.review_states), scope.since, scope.until, list(scope.repo_keys) or None,
            list(scope.security_scopes) or None)


def _hits(rows: Sequence[asyncpg.Record]) -> list[IndexHit]:
    return [IndexHit(str(row["payload"]["record_id"]), float(row["score"]), row["payload"])
            for row in rows]


def search_hits(rows: Sequence[asyncpg.Record]) -> list[IndexHit]:
    """Rows of `record_id` and `score` as search hits (SearchIndex.search)."""
    return [search_hit(row["record_id"], float(row["score"])) for row in rows]
