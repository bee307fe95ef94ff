"""The similarity model's vectors of stored texts: each distinct text embedded once, then read
back by its digest, in the order asked, whatever model the cache also holds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from processors.text.embedding import Vector
from stores.similarity_vectors import text_digest
from streams.plumbing.runtime import cached_similarity_vectors


@dataclass
class Spec:
    name: str


@dataclass
class CountingEmbedder:
    """A model whose vector of a text is its length and its number of words."""

    spec: Spec = field(default_factory=lambda: Spec("judge"))
    dimension: int = 2
    embedded: list[str] = field(default_factory=list)

    def embed(self, texts: Sequence[str], *, role: str) -> Vector:
        assert role == "passage"
        self.embedded += texts
        return np.array([[len(text), len(text.split())] for text in texts], dtype=np.float32)


class InMemorySimilarityVectors:
    def __init__(self) -> None:
        self.kept: dict[tuple[str, bytes], Vector] = {}

    async def vectors(self, model: str, digests: Sequence[bytes]) -> Mapping[bytes, Vector]:
        return {digest: self.kept[model, digest] for digest in digests
                if (model, digest) in self.kept}

    async def store(self, model: str, vectors: Sequence[tuple[bytes, Vector]]) -> None:
        for digest, vector in vectors:
            self.kept.setdefault((model, digest), vector)


async def test_each_text_is_embedded_once_and_read_back_in_the_order_asked() -> None:
    cache, judge = InMemorySimilarityVectors(), CountingEmbedder()
    first = await cached_similarity_vectors(cache, judge, None, ["a b", "ccc", "a b"])  # type: ignore[arg-type]
    assert judge.embedded == ["a b", "ccc"]
    assert first.tolist() == [[3, 2], [3, 1], [3, 2]]
    again = await cached_similarity_vectors(cache, judge, None, ["ccc", "d e f", "a b"])  # type: ignore[arg-type]
    assert judge.embedded == ["a b", "ccc", "d e f"]
    assert again.tolist() == [[3, 1], [5, 3], [3, 2]]
    assert set(cache.kept) == {("judge", text_digest(text)) for text in ("a b", "ccc", "d e f")}
    assert (await cached_similarity_vectors(cache, judge, None, [])).shape == (0, 2)  # type: ignore[arg-type]


async def test_another_models_vectors_are_never_read() -> None:
    cache = InMemorySimilarityVectors()
    await cache.store("other", [(text_digest("a b"), np.array([9.0, 9.0], dtype=np.float32))])
    judge = CountingEmbedder()
    vectors = await cached_similarity_vectors(cache, judge, None, ["a b"])  # type: ignore[arg-type]
    assert judge.embedded == ["a b"] and vectors.tolist() == [[3, 2]]
