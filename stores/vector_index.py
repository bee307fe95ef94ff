"""The retrieval index: one small interface (`VectorIndex`) and what its backends share.

Postgres is the source of truth; the index holds one point per live record and can always be
rebuilt from it (stores.reindex). Point ids are derived from record ids, so a replay or a
restart overwrites a point instead of duplicating it. Every search names its namespace:
namespaces never mix. The backends are chosen by URL in stores.index_factory.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from processors.errors import IndexRefused

DEFAULT_COLLECTION = "memstream"
DIM = 384
# Fixed forever: changing it changes every point id, and a rebuilt index would no longer
# overwrite the points a running worker writes.
POINT_ID_NAMESPACE = uuid.UUID("6f1d3c52-8a4e-5b0c-9d27-3e8f4a1b2c6d")

# The payload fields that get an index, and their type. `created_at` is epoch seconds.
KEYWORD_FIELDS = ("namespace", "record_kind", "related_ids", "tags", "scope", "agent_id")
FLOAT_FIELDS = ("created_at", "expires_at")

Vector = Sequence[float] | NDArray[np.floating[Any]]



def point_id(record_id: str) -> uuid.UUID:
    """The index point id of a record: a UUIDv5 of its record id."""
    return uuid.uuid5(POINT_ID_NAMESPACE, record_id)


@dataclass(frozen=True)
class IndexPoint:
    record_id: str
    vector: Vector
    payload: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class IndexHit:
    record_id: str
    score: float
    payload: dict[str, Any]


@dataclass(frozen=True)
class SearchScope:
    """What one search may return and how much: the `limit` nearest records of `namespace`
    with cosine similarity >= `min_score`, optionally only of these kinds / only those
    listing `related_id`; personal records only to their owner `agent_id`."""

    namespace: str
    limit: int
    min_score: float
    record_kinds: tuple[str, ...] = ()
    related_id: str | None = None
    agent_id: str | None = None

    def __post_init__(self) -> None:
        if not self.namespace:
            raise ValueError("namespace is required: searches never cross namespaces")
        if self.limit < 1:
            raise ValueError(f"limit must be at least 1, got {self.limit}")
        if math.isnan(self.min_score):
            raise ValueError("min_score is NaN")


@dataclass(frozen=True)
class Visibility:
    """What a search may return: shared records and the personal ones of `agent_id`, none
    expired at `now` (epoch seconds)."""

    agent_id: str | None
    now: float


class VectorIndex(Protocol):
    async def ensure_collection(self) -> None:
        """Create the collection (cosine, `dim`) and its payload indexes if missing; fail if
        an existing one has another dimension."""

    async def upsert(self, points: Sequence[IndexPoint]) -> None:
        """Insert or overwrite points. Each payload must carry a non-empty `namespace`."""

    async def delete(self, record_ids: Sequence[str]) -> None:
        """Delete the points of these records; unknown ids are ignored."""

    async def search(self, vector: Vector, scope: SearchScope) -> list[IndexHit]:
        """The points within `scope`, best first.

        Only what the caller may see: shared records, and the personal ones of the scope's
        `agent_id`; never a record whose `expires_at` has passed."""

    async def count(self, namespace: str | None = None) -> int:
        """Exact number of points, in one namespace or in all."""

    def iter_record_ids(
        self, namespace: str | None = None, batch_size: int = 1024
    ) -> AsyncIterator[list[str]]:
        """Every indexed record id, in batches (for pruning during a rebuild)."""

    async def close(self) -> None:
        """Release the index; safe to call twice."""


@dataclass(frozen=True)
class PreparedPoint:
    """A point checked and normalised for a backend: numpy row, payload with `record_id`."""

    id: uuid.UUID
    vector: NDArray[np.float32]
    payload: dict[str, Any]


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
                      {**point.payload, "record_id": point.record_id})
        for point, vector in zip(points, vectors, strict=True)
    ]
