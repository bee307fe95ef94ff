"""The retrieval index: one small interface (`VectorIndex`) and what its backends share.

Postgres is the source of truth; the index holds one point per live record and can always be
rebuilt from it (stores.index.reindex). Point ids are derived from record ids, so a replay or a
restart overwrites a point instead of duplicating it. Every search names its namespace:
namespaces never mix. The backends are chosen by URL in stores.index.factory.

A point has two vectors: the dense embedding, and the lexical one (BM25 term weights,
processors/text/lexical.py), whose term ids the payload also lists (`terms`) so that the index can
count in how many of a namespace's records a term occurs (the IDF of a query's terms).
"""

from __future__ import annotations

import math
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from processors.events.errors import IndexRefused
from processors.text.embedding import Vector
from processors.text.lexical import NO_TERMS, SparseVector
from stores.index.payload import NAMESPACE_WIDE, readers_of

DEFAULT_COLLECTION = "memstream"
DIM = 384
# Fixed forever: changing it changes every point id, and a rebuilt index would no longer
# overwrite the points a running worker writes.
POINT_ID_NAMESPACE = uuid.UUID("6f1d3c52-8a4e-5b0c-9d27-3e8f4a1b2c6d")

# The payload fields that get an index, and their type. `created_at` is epoch seconds.
KEYWORD_FIELDS = ("namespace", "record_kind", "related_ids", "tags", "scope", "agent_id",
                  "memory_type", "tier", "review_state", "readers", "repo", "security_scope")
FLOAT_FIELDS = ("created_at", "expires_at", "live_until")
INTEGER_FIELDS = ("terms",)
# The name of the lexical vector beside the (unnamed) dense one.
LEXICAL = "lexical"



def point_id(record_id: str) -> uuid.UUID:
    """The index point id of a record: a UUIDv5 of its record id."""
    return uuid.uuid5(POINT_ID_NAMESPACE, record_id)


@dataclass(frozen=True)
class IndexPoint:
    record_id: str
    vector: Vector
    payload: Mapping[str, Any] = field(default_factory=dict)
    lexical: SparseVector = NO_TERMS


@dataclass(frozen=True)
class IndexHit:
    record_id: str
    score: float
    payload: dict[str, Any]


def search_hit(record_id: str, score: float) -> IndexHit:
    """A hit as SearchIndex.search answers it: its record id alone for a payload."""
    return IndexHit(record_id, score, {"record_id": record_id})


class ScopedRecord(Protocol):
    """What a scope looks at in a record (stores.records.FoundRecord has it)."""

    @property
    def record_kind(self) -> str: ...
    @property
    def related_ids(self) -> tuple[str, ...]: ...
    @property
    def scope(self) -> str: ...
    @property
    def agent_id(self) -> str | None: ...
    @property
    def tags(self) -> tuple[str, ...]: ...
    @property
    def memory_type(self) -> str | None: ...
    @property
    def tier(self) -> str: ...
    @property
    def review_state(self) -> str: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def repo(self) -> str | None: ...
    @property
    def security_scope(self) -> str | None: ...


@dataclass(frozen=True)
class SearchScope:
    """What one search may return and how much: the `limit` best records of `namespace`
    (dense: with cosine similarity >= `min_score`), personal records only to their owner
    `agent_id`, and, when given, only those of these kinds, memory types, tiers and review
    states (approved only, unless asked), holding one of `tags`, listing one of
    `related_ids`, created (occurred) within [`since`, `until`] (epoch seconds), belonging to
    one of `repos` or to none (the namespace's), labelled with one of `security_scopes`."""

    namespace: str
    limit: int
    min_score: float
    record_kinds: tuple[str, ...] = ()
    related_ids: tuple[str, ...] = ()
    agent_id: str | None = None
    tags: tuple[str, ...] = ()
    memory_types: tuple[str, ...] = ()
    tiers: tuple[str, ...] = ()
    review_states: tuple[str, ...] = ("approved",)
    since: float | None = None
    until: float | None = None
    repos: tuple[str, ...] = ()
    security_scopes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.namespace:
            raise ValueError("namespace is required: searches never cross namespaces")
        if self.limit < 1:
            raise ValueError(f"limit must be at least 1, got {self.limit}")
        if math.isnan(self.min_score):
            raise ValueError("min_score is NaN")
        if not self.review_states:
            raise ValueError("review_states is empty: nothing could be returned")

    def admits(self, record: ScopedRecord) -> bool:
        """Whether a record of this scope's namespace, read from Postgres, is within this
        scope by the rules the index applies to its payload (a record a graph walk reached,
        say)."""
        created = record.created_at.timestamp()
        return ((not self.record_kinds or record.record_kind in self.record_kinds)
                and (not self.related_ids or bool(set(record.related_ids)
                                                  & set(self.related_ids)))
                and (record.scope == "shared" or record.agent_id == self.agent_id)
                and (not self.tags or bool(set(record.tags) & set(self.tags)))
                and (not self.memory_types or record.record_kind != "memory"
                     or record.memory_type in self.memory_types)
                and (not self.tiers or record.tier in self.tiers)
                and record.review_state in self.review_states
                and (self.since is None or created >= self.since)
                and (self.until is None or created <= self.until)
                and (not self.repos or record.repo is None or record.repo in self.repos)
                and (not self.security_scopes or record.security_scope in self.security_scopes))

    def admits_point(self, payload: Mapping[str, Any], now: float) -> bool:
        """Whether an index point's payload (stores.index.payload) is within this scope, by
        the same rules as the index's filter: for a caller that searched its namespace alone
        (`VectorIndex.nearest`)."""
        return payload["live_until"] > now and self.admits(_PayloadRecord(payload))

    @property
    def repo_keys(self) -> tuple[str, ...]:
        """The index's `repo` values a search narrowed to `repos` reads: theirs and the
        namespace-wide records' (none: no narrowing)."""
        return (*self.repos, NAMESPACE_WIDE) if self.repos else ()


@dataclass(frozen=True)
class _PayloadRecord:
    """An index point's payload as the record it was made from, for `SearchScope.admits`."""

    payload: Mapping[str, Any]

    @property
    def record_kind(self) -> str:
        return str(self.payload["record_kind"])

    @property
    def related_ids(self) -> tuple[str, ...]:
        return tuple(self.payload.get("related_ids") or ())

    @property
    def scope(self) -> str:
        return str(self.payload["scope"])

    @property
    def agent_id(self) -> str | None:
        return self.payload.get("agent_id")

    @property
    def tags(self) -> tuple[str, ...]:
        return tuple(self.payload.get("tags") or ())

    @property
    def memory_type(self) -> str | None:
        return self.payload.get("memory_type")

    @property
    def tier(self) -> str:
        return str(self.payload["tier"])

    @property
    def review_state(self) -> str:
        return str(self.payload["review_state"])

    @property
    def created_at(self) -> datetime:
        return datetime.fromtimestamp(self.payload["created_at"], UTC)

    @property
    def repo(self) -> str | None:
        repo = self.payload.get("repo")
        return None if repo in (None, NAMESPACE_WIDE) else str(repo)

    @property
    def security_scope(self) -> str | None:
        return self.payload.get("security_scope")


@dataclass(frozen=True)
class TermCounts:
    """How many of a namespace's indexed records there are, and how many hold each term."""

    documents: int
    frequencies: dict[int, int]


class CountCache:
    """Counts of a namespace's points and of each term's, kept `ttl_s`: a query's IDF needs
    them roughly, and an exact count costs the index a scan (10 ms for a namespace of 100k
    points in the embedded engine)."""

    def __init__(self, ttl_s: float = 30.0, max_entries: int = 200_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl_s = ttl_s
        self._max_entries = max_entries
        self._clock = clock
        self._counted: OrderedDict[tuple[str, int | None], tuple[float, int]] = OrderedDict()

    async def counts(self, namespace: str, term_ids: Sequence[int],
                     count: Callable[[int | None], Awaitable[int]]) -> TermCounts:
        """The counts, from `count(term)` (`count(None)`: the namespace's points) for those
        not counted within the last `ttl_s`."""
        documents = await self._count(namespace, None, count)
        return TermCounts(documents, {term: await self._count(namespace, term, count)
                                      for term in term_ids})

    async def _count(self, namespace: str, term: int | None,
                     count: Callable[[int | None], Awaitable[int]]) -> int:
        key = (namespace, term)
        now = self._clock()
        cached = self._counted.get(key)
        if cached is not None and now - cached[0] < self._ttl_s:
            return cached[1]
        value = await count(term)
        self._counted[key] = (now, value)
        self._counted.move_to_end(key)
        while len(self._counted) > self._max_entries:
            self._counted.popitem(last=False)
        return value


@dataclass(frozen=True)
class Visibility:
    """What a search may return: shared records and the personal ones of `agent_id`, none
    expired at `now` (epoch seconds)."""

    agent_id: str | None
    now: float

    @property
    def readers(self) -> list[str]:
        """The `readers` payload values (stores.index.payload) this search may see."""
        return [readers_of("shared", None)] + (
            [readers_of("personal", self.agent_id)] if self.agent_id is not None else [])


class SearchIndex(Protocol):
    """The read side of an index: what hybrid search asks of it. The index backends have
    it, and so has the Postgres fallback (stores.index.postgres_search), so that one search
    algorithm runs over either."""

    async def search(self, vector: Vector, scope: SearchScope) -> list[IndexHit]:
        """The points within `scope` nearest to `vector` (cosine), best first, each with
        its record id alone for a payload (a ranking needs no more, and a hundred hits'
        payloads cost a search about a millisecond).

        Only what the caller may see: shared records, and the personal ones of the scope's
        `agent_id`; never a record whose `expires_at` has passed."""

    async def search_lexical(self, query: SparseVector, scope: SearchScope) -> list[IndexHit]:
        """The points within `scope` whose lexical vectors score highest against `query`
        (their dot product: BM25 when `query` holds IDF weights), best first, each with its
        record id alone for a payload; the same visibility rules; `min_score` does not
        apply."""

    async def term_counts(self, namespace: str, term_ids: Sequence[int]) -> TermCounts:
        """The namespace's number of points, and of points holding each term."""


class VectorIndex(SearchIndex, Protocol):
    async def ensure_collection(self) -> None:
        """Create the collection (cosine, `dim`) and its payload indexes if missing; fail if
        an existing one has another dimension."""

    async def nearest(self, vector: Vector, namespace: str, limit: int,
                      min_score: float) -> list[IndexHit]:
        """The `limit` points of `namespace` nearest to `vector` at cosine >= `min_score`,
        whatever their kind, owner, state or expiry, best first, with their payloads: for a
        caller that judges them itself (`SearchScope.admits_point`). On the embedded engine,
        the namespace alone is what keeps a search of the points not yet in a graph cheap
        (docs/performance.md)."""

    async def upsert(self, points: Sequence[IndexPoint]) -> None:
        """Insert or overwrite points. Each payload must carry a non-empty `namespace`."""

    async def delete(self, record_ids: Sequence[str]) -> None:
        """Delete the points of these records; unknown ids are ignored."""

    async def count(self, namespace: str | None = None) -> int:
        """Exact number of points, in one namespace or in all."""

    async def maintain(self, min_changes: int) -> bool:
        """Compact the index and build its per-namespace graphs, if the backend leaves that
        to its owner and `min_changes` points changed since; True if it did."""

    def iter_record_ids(
        self, namespace: str | None = None, batch_size: int = 1024
    ) -> AsyncIterator[list[str]]:
        """Every indexed record id, in batches (for pruning during a rebuild)."""

    async def close(self) -> None:
        """Release the index; safe to call twice."""


@dataclass(frozen=True)
class PreparedPoint:
    """A point checked and normalised for a backend: numpy row, payload with `record_id` and
    the lexical vector's term ids (`terms`)."""

    id: uuid.UUID
    vector: NDArray[np.float32]
    payload: dict[str, Any]
    lexical: SparseVector


def as_vector(vector: Vector, dim: int) -> NDArray[np.float32]:
    """`vector` as a float32 array of shape (dim,); ValueError if it cannot be scored."""
    array = np.asarray(vector, dtype=np.float32)
    if array.shape != (dim,):
        raise ValueError(f"expected a vector of dimension {dim}, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError("vector has NaN or infinite components")
    if not np.any(array):
        raise ValueError("zero vector has no cosine similarity")
    return array


def prepare_points(points: Sequence[IndexPoint], dim: int) -> list[PreparedPoint]:
    if not points:
        return []
    for point in points:
        namespace = point.payload.get("namespace")
        if not isinstance(namespace, str) or not namespace:
            # A point without a namespace could never be found: every search filters on it.
            raise IndexRefused(
                f"record {point.record_id!r}: payload needs a non-empty namespace")
    # One array for the batch: checking it whole is ~10x cheaper than vector by vector.
    try:
        vectors = np.asarray([point.vector for point in points], dtype=np.float32)
    except ValueError as exc:  # ragged
        raise IndexRefused(f"expected vectors of dimension {dim}: {exc}") from None
    if vectors.shape != (len(points), dim):
        raise IndexRefused(
            f"expected vectors of dimension {dim}, got shape {vectors.shape[1:]}")
    if not np.isfinite(vectors).all():
        raise IndexRefused("a vector has NaN or infinite components")
    if not vectors.any(axis=1).all():
        raise IndexRefused("a zero vector has no cosine similarity")
    return [
        PreparedPoint(point_id(point.record_id), vector,
                      {**point.payload, "record_id": point.record_id,
                       "terms": list(point.lexical.indices)}, point.lexical)
        for point, vector in zip(points, vectors, strict=True)
    ]
