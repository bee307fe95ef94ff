"""The similarity model's vectors of texts (migration 0030), by the text's sha256: what the
rules that judge whether two texts say the same thing (twins, consolidation) compare. A text
is embedded by that model the first time a rule needs it and read back every later time, so
that a consolidation of a namespace embeds only what is new since the last one."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Protocol

import asyncpg

from processors.text.embedding import Vector

_READ = """
SELECT text_sha256, embedding FROM similarity_vectors
WHERE model = $1 AND text_sha256 = ANY($2::bytea[])
"""
_WRITE = """
INSERT INTO similarity_vectors (model, text_sha256, embedding) VALUES ($1, $2, $3)
ON CONFLICT (model, text_sha256) DO NOTHING
"""


def text_digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


class SimilarityVectors(Protocol):
    async def vectors(self, model: str, digests: Sequence[bytes]) -> Mapping[bytes, Vector]:
        """The stored vectors of `model` among those digests."""

    async def store(self, model: str, vectors: Sequence[tuple[bytes, Vector]]) -> None:
        """Keep these (digest, vector) pairs; a digest kept already stays as it is."""


class PostgresSimilarityVectors:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def vectors(self, model: str, digests: Sequence[bytes]) -> Mapping[bytes, Vector]:
        if not digests:
            return {}
        rows = await self._pool.fetch(_READ, model, list(digests))
        return {bytes(row["text_sha256"]): row["embedding"] for row in rows}

    async def store(self, model: str, vectors: Sequence[tuple[bytes, Vector]]) -> None:
        if vectors:
            await self._pool.executemany(
                _WRITE, [(model, digest, vector) for digest, vector in vectors])
