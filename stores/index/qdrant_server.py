"""The index on qdrant-client's AsyncQdrantClient: a Qdrant server (or cluster) by URL, or the
client's local mode (`path=` on disk, or `:memory:`), which the tests use.

Local mode is a pure-Python brute-force engine: fine for tests and small data, not for load
(it also ignores payload indexes, so we do not create them there).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from qdrant_client import AsyncQdrantClient, models
from qdrant_client.http.exceptions import UnexpectedResponse

from processors.text.embedding import Vector
from processors.text.lexical import SparseVector
from stores.index.conditions import (
    AnyOf,
    Condition,
    NoneOf,
    OneOf,
    Within,
    in_namespace,
    scope_conditions,
)
from stores.index.protocol import (
    DEFAULT_COLLECTION,
    DIM,
    FLOAT_FIELDS,
    INTEGER_FIELDS,
    KEYWORD_FIELDS,
    LEXICAL,
    CountCache,
    IndexHit,
    IndexPoint,
    SearchScope,
    TermCounts,
    as_vector,
    point_id,
    prepare_points,
)

# A nearest point's payload without its term ids (a hundred hits' lists of them are heavy);
# a search hit's, its record id alone.
_NEAREST_PAYLOAD = models.PayloadSelectorExclude(exclude=["terms"])
_HIT_PAYLOAD = models.PayloadSelectorInclude(include=["record_id"])
# Points per request: bounds a request's size (a 384-d point is ~4 kB of JSON).
_UPSERT_CHUNK = 512


class QdrantClientIndex:
    def __init__(
        self,
        client: AsyncQdrantClient,
        *,
        collection: str = DEFAULT_COLLECTION,
        dim: int = DIM,
        local: bool = False,
    ) -> None:
        self._client = client
        self._collection = collection
        self._dim = dim
        self._local = local
        self._closed = False
        self._counts = CountCache()

    @classmethod
    def for_server(
        cls, url: str, *, collection: str = DEFAULT_COLLECTION, dim: int = DIM,
        api_key: str | None = None, timeout_s: int = 10,
    ) -> QdrantClientIndex:
        client = AsyncQdrantClient(url=url, api_key=api_key, timeout=timeout_s)
        return cls(client, collection=collection, dim=dim)

    @classmethod
    def local(
        cls, location: str, *, collection: str = DEFAULT_COLLECTION, dim: int = DIM
    ) -> QdrantClientIndex:
        """`:memory:` or a directory (one process at a time may open it)."""
        if location == ":memory:":
            client = AsyncQdrantClient(location=":memory:")
        else:
            client = AsyncQdrantClient(path=location)
        return cls(client, collection=collection, dim=dim, local=True)

    async def ensure_collection(self) -> None:
        if await self._client.collection_exists(self._collection):
            await self._check_dimension()
        else:
            try:
                await self._client.create_collection(
                    self._collection,
                    vectors_config=models.VectorParams(size=self._dim,
                                                       distance=models.Distance.COSINE),
                    # The lexical vector, scored by dot product with the query's IDF weights.
                    sparse_vectors_config={LEXICAL: models.SparseVectorParams()},
                    # Every search filters on one namespace: Qdrant's multitenant layout
                    # (no global HNSW graph, one graph per large tenant) fits exactly.
                    hnsw_config=models.HnswConfigDiff(m=0, payload_m=16),
                )
            except UnexpectedResponse as exc:
                # Another worker created it between our check and our create.
                if exc.status_code != 409:
                    raise
                await self._check_dimension()
        if self._local:
            return
        await self._client.create_payload_index(
            self._collection, "namespace",
            models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True),
        )
        # The other fields only narrow a namespace's candidates: no extra HNSW links for them
        # (payload_m would otherwise build a graph per large tag or kind).
        for name in KEYWORD_FIELDS:
            if name != "namespace":
                await self._client.create_payload_index(
                    self._collection, name,
                    models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD,
                                              enable_hnsw=False),
                )
        for name in FLOAT_FIELDS:
            await self._client.create_payload_index(
                self._collection, name,
                models.FloatIndexParams(type=models.FloatIndexType.FLOAT, enable_hnsw=False),
            )
        for name in INTEGER_FIELDS:
            await self._client.create_payload_index(
                self._collection, name,
                models.IntegerIndexParams(type=models.IntegerIndexType.INTEGER, lookup=True,
                                          range=False, enable_hnsw=False),
            )

    async def _check_dimension(self) -> None:
        info = await self._client.get_collection(self._collection)
        vectors = info.config.params.vectors
        size = vectors.size if isinstance(vectors, models.VectorParams) else None
        if size != self._dim:
            raise ValueError(
                f"collection {self._collection!r} holds vectors of size {size}, "
                f"expected {self._dim}: rebuild it (stores.index.reindex) into a new collection"
            )
        if LEXICAL not in (info.config.params.sparse_vectors or {}):
            raise ValueError(
                f"collection {self._collection!r} has no {LEXICAL!r} sparse vector (made by an "
                "older version): rebuild it (stores.index.reindex) into a new collection"
            )

    async def upsert(self, points: Sequence[IndexPoint]) -> None:
        prepared = prepare_points(points, self._dim)
        for start in range(0, len(prepared), _UPSERT_CHUNK):
            chunk = prepared[start : start + _UPSERT_CHUNK]
            await self._client.upsert(
                self._collection,
                points=[
                    models.PointStruct(
                        id=str(p.id),
                        vector={"": p.vector.tolist(),
                                LEXICAL: models.SparseVector(indices=list(p.lexical.indices),
                                                             values=list(p.lexical.values))},
                        payload=p.payload)
                    for p in chunk
                ],
                wait=True,
            )

    async def delete(self, record_ids: Sequence[str]) -> None:
        if not record_ids:
            return
        await self._client.delete(
            self._collection,
            points_selector=models.PointIdsList(points=[str(point_id(r)) for r in record_ids]),
            wait=True,
        )

    async def search(self, vector: Vector, scope: SearchScope) -> list[IndexHit]:
        response = await self._client.query_points(
            self._collection,
            query=as_vector(vector, self._dim).tolist(),
            query_filter=_filter(scope_conditions(scope, time.time())),
            limit=scope.limit,
            score_threshold=scope.min_score,
            with_payload=_HIT_PAYLOAD,
        )
        return [_hit(point.payload or {}, point.score) for point in response.points]

    async def nearest(self, vector: Vector, namespace: str, limit: int,
                      min_score: float) -> list[IndexHit]:
        response = await self._client.query_points(
            self._collection,
            query=as_vector(vector, self._dim).tolist(),
            query_filter=_filter(in_namespace(namespace)),
            limit=limit,
            score_threshold=min_score,
            with_payload=_NEAREST_PAYLOAD,
        )
        return [_hit(point.payload or {}, point.score) for point in response.points]

    async def search_lexical(self, query: SparseVector, scope: SearchScope) -> list[IndexHit]:
        if not query:
            return []
        response = await self._client.query_points(
            self._collection,
            query=models.SparseVector(indices=list(query.indices), values=list(query.values)),
            using=LEXICAL,
            query_filter=_filter(scope_conditions(scope, time.time())),
            limit=scope.limit,
            with_payload=_HIT_PAYLOAD,
        )
        return [_hit(point.payload or {}, point.score) for point in response.points]

    async def term_counts(self, namespace: str, term_ids: Sequence[int]) -> TermCounts:
        in_namespace = models.FieldCondition(key="namespace",
                                             match=models.MatchValue(value=namespace))

        async def count(term: int | None) -> int:
            holding: list[models.Condition] = [] if term is None else [models.FieldCondition(
                key="terms", match=models.MatchValue(value=term))]
            result = await self._client.count(
                self._collection, count_filter=models.Filter(must=[in_namespace, *holding]),
                exact=True)
            return result.count

        return await self._counts.counts(namespace, term_ids, count)

    async def maintain(self, min_changes: int) -> bool:
        # A Qdrant server runs its optimizers itself; local mode has none to run.
        return False

    async def count(self, namespace: str | None = None) -> int:
        result = await self._client.count(
            self._collection,
            count_filter=_filter(in_namespace(namespace)) if namespace else None,
            exact=True,
        )
        return result.count

    async def iter_record_ids(
        self, namespace: str | None = None, batch_size: int = 1024
    ) -> AsyncIterator[list[str]]:
        offset: models.ExtendedPointId | None = None
        while True:
            records, next_offset = await self._client.scroll(
                self._collection,
                scroll_filter=_filter(in_namespace(namespace)) if namespace else None,
                limit=batch_size,
                offset=offset,
                with_payload=["record_id"],
                with_vectors=False,
            )
            ids = [str(r.payload["record_id"]) for r in records
                   if r.payload and "record_id" in r.payload]
            if ids:
                yield ids
            if next_offset is None:
                return
            offset = next_offset

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            await self._client.close()


def _filter(conditions: Sequence[Condition]) -> models.Filter:
    """The client's filter of conditions that must all hold (stores/index/conditions.py)."""
    return models.Filter(must=[_condition(condition) for condition in conditions])


def _condition(condition: Condition) -> models.Condition:
    match condition:
        case OneOf(field, (value,)):
            return models.FieldCondition(key=field, match=models.MatchValue(value=value))
        case OneOf(field, values):
            return models.FieldCondition(key=field, match=models.MatchAny(any=list(values)))
        case Within(field, gt, gte, lte):
            return models.FieldCondition(key=field, range=models.Range(gt=gt, gte=gte, lte=lte))
        case AnyOf(conditions):
            return models.Filter(should=[_condition(each) for each in conditions])
        case NoneOf(conditions):
            return models.Filter(must_not=[_condition(each) for each in conditions])


def _hit(payload: dict[str, Any], score: float) -> IndexHit:
    return IndexHit(record_id=str(payload.get("record_id", "")), score=score, payload=payload)
