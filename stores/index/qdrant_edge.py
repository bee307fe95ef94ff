"""The index on Qdrant's embedded engine (qdrant-edge-py): one shard in `<path>/<collection>`.

Why the engine's calls run inline on the event loop, not in `asyncio.to_thread`: they hold
the GIL for (almost) their whole duration -- measured with a spinning Python thread, which got
0% of its free-running rate during a query or optimize, 4% during an upsert, 12% during a
flush -- so a thread would give the loop nothing back and only add a hop. They are also short:
a namespace-filtered search takes ~0.5 ms at 100k points, an upsert of 512 points ~45 ms
(half of it turning Python floats into the engine's points), see bench/index_bench.py.

Durability: every update goes to the shard's write-ahead log first, and a reopened shard
replays it (tested: a process killed without flush or close loses nothing). `flush()` persists
the segments, so a restart replays only what came after; we flush at most every
`flush_interval_s` after a write and on close. The engine has no background optimizer:
`optimize()` merges segments and drops deleted points when asked, and blocks the process while
it runs (4 s at 100k points with our config; 100 s with a global HNSW graph), so the worker
never calls it (stores.index.reindex does).

One process at a time: the shard locks its log, and a second open fails.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from pathlib import Path

import qdrant_edge as qe

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
    search_hit,
)

log = logging.getLogger(__name__)

# A nearest point's payload without its term ids: a hundred hits' lists of them cost a
# search 3 ms.
_NEAREST_PAYLOAD = qe.PayloadSelector.Exclude(["terms"])
_RECORD_ID = qe.PayloadSelector.Include(["record_id"])
# The record ids of points met before, kept for searches (RecordIds): 100 MB at most.
RECORD_IDS_KEPT = 500_000


class RecordIds:
    """The record id of each point id met, the oldest forgotten past `max_entries`. A point
    id is a UUIDv5 of its record id (stores.index.protocol.point_id), which cannot be undone,
    and reading even that one field of a hit's payload was most of a search's time in the
    engine (at 30k points: a dense search of 50 hits 0.48 ms without payloads, 0.88 ms with
    the record id; a lexical one of 100, 0.16 against 0.65 ms). What a point id names never
    changes, so nothing kept goes stale."""

    def __init__(self, max_entries: int = RECORD_IDS_KEPT) -> None:
        self._max_entries = max_entries
        self._known: dict[qe.PointId, str] = {}

    def note(self, pairs: Iterable[tuple[qe.PointId, str]]) -> None:
        self._known.update(pairs)
        if len(self._known) > self._max_entries:
            # Dicts keep insertion order: the first tenth are the oldest.
            for stale in list(itertools.islice(self._known, self._max_entries // 10)):
                del self._known[stale]

    def __len__(self) -> int:
        return len(self._known)

    @property
    def room(self) -> int:
        return self._max_entries - len(self._known)

    def of(self, shard: qe.EdgeShard, ids: Sequence[qe.PointId]) -> list[str | None]:
        """Each id's record id; those not known are read from their payloads in one call
        (None: a point without one)."""
        missing = [i for i in ids if i not in self._known]
        if missing:
            self.note((point.id, str(point.payload["record_id"]))
                      for point in shard.retrieve(missing, _RECORD_ID, False)
                      if point.payload and "record_id" in point.payload)
        return [self._known.get(i) for i in ids]


class EdgeIndexError(RuntimeError):
    """The shard is not open, or cannot be opened with this configuration."""


class EdgeIndex:
    def __init__(
        self,
        path: str | Path,
        *,
        collection: str = DEFAULT_COLLECTION,
        dim: int = DIM,
        flush_interval_s: float = 5.0,
        record_ids_kept: int = RECORD_IDS_KEPT,
    ) -> None:
        self._path = Path(path) / collection
        self._dim = dim
        self._flush_interval_s = flush_interval_s
        self._shard: qe.EdgeShard | None = None
        self._dirty_since: float | None = None
        self._counts = CountCache()
        self._record_ids = RecordIds(record_ids_kept)
        # Points written since the segments were last optimized (see `maintain`).
        self._changes = 0
        # Writes are applied in call order: upserts of the same record must not overtake
        # each other, whatever the caller's tasks do.
        self._write_lock = asyncio.Lock()

    @property
    def path(self) -> Path:
        return self._path

    def _config(self) -> qe.EdgeConfig:
        return qe.EdgeConfig(
            # 16-bit storage halves the bytes a filtered full scan reads. Measured at 100k
            # model vectors in one namespace, p50 and recall@10 against exact float32:
            # Float32 9.8 ms; Float16 6.6 ms, 0.998; Turbo16 5.3 ms, 1.0; Turbo8 3.5 ms, 0.975.
            vectors=qe.EdgeVectorParams(size=self._dim, distance=qe.Distance.Cosine,
                                        datatype=qe.VectorStorageDatatype.Turbo16),
            # Every search filters on one namespace: no global HNSW graph (m=0), a graph per
            # namespace once it is large enough to need one (payload_m); smaller namespaces
            # are scanned through the namespace index, which is faster than a graph anyway.
            hnsw_config=qe.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10_000,
                                           payload_m=16),
            # The lexical vector: an inverted index, scored by dot product with the query's
            # IDF weights (processors/text/lexical.py).
            sparse_vectors={LEXICAL: qe.EdgeSparseVectorParams()},
        )

    async def ensure_collection(self) -> None:
        if self._shard is not None:
            return
        config = self._config()
        try:
            shard = self._open_or_create(config)
        except Exception as exc:  # the engine raises bare Exception
            hint = ""
            if "WouldBlock" in str(exc):
                hint = " (another process has it open: one process at a time, e.g. the worker)"
            raise EdgeIndexError(
                f"cannot open the edge shard at {self._path}: {exc}{hint}"
            ) from exc
        existing = shard.info().payload_schema
        wanted: dict[str, qe.KeywordIndexParams | qe.FloatIndexParams
                     | qe.IntegerIndexParams] = {
            # The tenant flag keeps each namespace's points together on disk.
            "namespace": qe.KeywordIndexParams(is_tenant=True),
            # The other fields only narrow a namespace's candidates: no HNSW links for them.
            **{name: qe.KeywordIndexParams(enable_hnsw=False)
               for name in KEYWORD_FIELDS if name != "namespace"},
            **{name: qe.FloatIndexParams(enable_hnsw=False) for name in FLOAT_FIELDS},
            # Term ids are only counted (IDF), never ranged.
            **{name: qe.IntegerIndexParams(lookup=True, range=False, enable_hnsw=False)
               for name in INTEGER_FIELDS},
        }
        for name, params in wanted.items():
            if name not in existing:
                shard.update(qe.UpdateOperation.create_field_index(name, params))
        self._shard = shard
        # Met at open, the points already stored are named without a read: the first
        # searches after a restart are as quick as the rest (the open takes 1.3 s longer at
        # 100k points).
        started = time.perf_counter()
        self._record_ids.note(self._stored_record_ids())
        log.info("edge index: the record ids of %d points read in %.2f s",
                 len(self._record_ids), time.perf_counter() - started)

    def _open_or_create(self, config: qe.EdgeConfig) -> qe.EdgeShard:
        if not (self._path / "edge_config.json").exists():
            self._path.mkdir(parents=True, exist_ok=True)
            return qe.EdgeShard.create(str(self._path), config)
        try:
            # Passing the config makes the engine check the stored vectors against it.
            return qe.EdgeShard.load(str(self._path), config)
        except Exception as exc:
            if "incompatible" not in str(exc).lower():
                raise
        # A shard of an older layout (before the lexical vector): the index is derived from
        # Postgres, so it is set aside and rebuilt (`make reindex`, or the worker at start).
        aside = self._path.with_name(f"{self._path.name}.old-{int(time.time())}")
        self._path.rename(aside)
        log.warning("the index at %s has an older layout: moved to %s; rebuild it with "
                    "`make reindex`", self._path, aside)
        self._path.mkdir(parents=True)
        return qe.EdgeShard.create(str(self._path), config)

    def _open_shard(self) -> qe.EdgeShard:
        if self._shard is None:
            raise EdgeIndexError(f"{self._path}: call ensure_collection() first (or closed)")
        return self._shard

    async def upsert(self, points: Sequence[IndexPoint]) -> None:
        prepared = prepare_points(points, self._dim)
        if not prepared:
            return
        operation = qe.UpdateOperation.upsert_points([
            qe.Point(p.id, {"": p.vector.tolist(),
                            LEXICAL: qe.SparseVector(list(p.lexical.indices),
                                                     list(p.lexical.values))}, p.payload)
            for p in prepared
        ])
        await self._write(operation, len(prepared))
        # What was just written is what the next searches find.
        self._record_ids.note((p.id, str(p.payload["record_id"])) for p in prepared)

    async def delete(self, record_ids: Sequence[str]) -> None:
        if not record_ids:
            return
        ids: list[qe.PointId] = [point_id(r) for r in record_ids]
        await self._write(qe.UpdateOperation.delete_points(ids), len(ids))

    async def _write(self, operation: qe.UpdateOperation, points: int) -> None:
        async with self._write_lock:
            self._changes += points
            shard = self._open_shard()
            shard.update(operation)
            now = time.monotonic()
            if self._dirty_since is None:
                self._dirty_since = now
            elif now - self._dirty_since >= self._flush_interval_s:
                shard.flush()
                self._dirty_since = None

    async def search(self, vector: Vector, scope: SearchScope) -> list[IndexHit]:
        query = as_vector(vector, self._dim).tolist()
        return self._search(qe.QueryRequest(
            limit=scope.limit, query=qe.Query.Nearest(query),
            filter=_filter(scope_conditions(scope, time.time())),
            score_threshold=scope.min_score, with_payload=False,
        ))

    async def nearest(self, vector: Vector, namespace: str, limit: int,
                      min_score: float) -> list[IndexHit]:
        return self._query(qe.QueryRequest(
            limit=limit, query=qe.Query.Nearest(as_vector(vector, self._dim).tolist()),
            filter=_filter(in_namespace(namespace)), score_threshold=min_score,
            with_payload=_NEAREST_PAYLOAD,
        ))

    async def search_lexical(self, query: SparseVector, scope: SearchScope) -> list[IndexHit]:
        if not query:
            return []
        return self._search(qe.QueryRequest(
            limit=scope.limit,
            query=qe.Query.Nearest(qe.SparseVector(list(query.indices), list(query.values)),
                                   using=LEXICAL),
            filter=_filter(scope_conditions(scope, time.time())), with_payload=False,
        ))

    def _search(self, request: qe.QueryRequest) -> list[IndexHit]:
        """A search's hits, their record ids from RecordIds (SearchIndex.search)."""
        shard = self._open_shard()
        points = shard.query(request)
        return [search_hit(record_id, point.score)
                for point, record_id in zip(
                    points, self._record_ids.of(shard, [point.id for point in points]),
                    strict=True)
                if record_id is not None]

    def _query(self, request: qe.QueryRequest) -> list[IndexHit]:
        hits: list[IndexHit] = []
        for point in self._open_shard().query(request):
            payload = point.payload or {}
            hits.append(IndexHit(str(payload.get("record_id", "")), point.score, payload))
        return hits

    async def term_counts(self, namespace: str, term_ids: Sequence[int]) -> TermCounts:
        in_namespace = qe.FieldCondition("namespace", match=qe.MatchValue(namespace))

        async def count(term: int | None) -> int:
            if term is None:
                # The namespace's size is its tenant index's count of it: as exact as the
                # scan (deleted points and other namespaces left out), 0.04 ms against 2.6 ms
                # at 30k points (10 ms at 100k, every 30 s for some search).
                return self._open_shard().count(qe.CountRequest(
                    exact=False, filter=qe.Filter(must=[in_namespace])))
            return self._open_shard().count(qe.CountRequest(exact=True, filter=qe.Filter(
                must=[in_namespace, qe.FieldCondition("terms", match=qe.MatchValue(term))])))

        return await self._counts.counts(namespace, term_ids, count)

    async def count(self, namespace: str | None = None) -> int:
        flt = _filter(in_namespace(namespace)) if namespace else None
        return self._open_shard().count(qe.CountRequest(exact=True, filter=flt))

    def _stored_record_ids(self) -> Iterator[tuple[qe.PointId, str]]:
        """Point ids and record ids of the points stored, as many as RecordIds has room for."""
        offset: qe.PointId | None = None
        room = self._record_ids.room
        while room > 0:
            points, offset = self._open_shard().scroll(qe.ScrollRequest(
                offset=offset, limit=min(room, 4096), with_payload=["record_id"],
                with_vector=False))
            for point in points:
                if point.payload and "record_id" in point.payload:
                    room -= 1
                    yield point.id, str(point.payload["record_id"])
            if offset is None:
                return

    async def iter_record_ids(
        self, namespace: str | None = None, batch_size: int = 1024
    ) -> AsyncIterator[list[str]]:
        offset: qe.PointId | None = None
        flt = _filter(in_namespace(namespace)) if namespace else None
        while True:
            records, offset = self._open_shard().scroll(
                qe.ScrollRequest(offset=offset, limit=batch_size, filter=flt,
                                 with_payload=["record_id"], with_vector=False)
            )
            ids = [str(r.payload["record_id"]) for r in records
                   if r.payload and "record_id" in r.payload]
            if ids:
                yield ids
            if offset is None:
                return

    async def flush(self) -> None:
        async with self._write_lock:
            self._open_shard().flush()
            self._dirty_since = None

    async def optimize(self) -> bool:
        """Merge segments, drop deleted points, build per-namespace graphs where needed.
        Blocks the whole process while it runs (seconds at 100k points)."""
        async with self._write_lock:
            self._changes = 0
            return self._open_shard().optimize()

    async def maintain(self, min_changes: int) -> bool:
        """Optimize once `min_changes` points changed: until then, a search filtered by more
        than its namespace scans the namespace (24 ms at 100k points; 0.2 ms optimized)."""
        if self._changes < min_changes:
            return False
        return await self.optimize()

    async def close(self) -> None:
        async with self._write_lock:
            shard, self._shard = self._shard, None
            if shard is not None:
                shard.flush()
                shard.close()


def _filter(conditions: Sequence[Condition]) -> qe.Filter:
    """The engine's filter of conditions that must all hold (stores/index/conditions.py)."""
    return qe.Filter(must=[_condition(condition) for condition in conditions])


def _condition(condition: Condition) -> qe.ConditionType:
    match condition:
        case OneOf(field, (value,)):
            return qe.FieldCondition(field, match=qe.MatchValue(value))
        case OneOf(field, values):
            return qe.FieldCondition(field, match=qe.MatchAny(list(values)))
        case Within(field, gt, gte, lte):
            return qe.FieldCondition(field, range=qe.RangeFloat(gt=gt, gte=gte, lte=lte))
        case AnyOf(conditions):
            return qe.Filter(should=[_condition(each) for each in conditions])
        case NoneOf(conditions):
            return qe.Filter(must_not=[_condition(each) for each in conditions])

