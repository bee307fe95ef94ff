"""The embedding model whose vectors a store holds (migration 0029): one model per store.

The first worker claims the store for its model; every later one checks it and refuses to
start when it embeds with another (`ModelMismatch`): vectors of two models share a dimension
but no meaning, and mixed they would rank nonsense without an error anywhere. A store moves
to another model by re-embedding everything (`python -m streams.commands.reembed --model
NAME` loads the model and drives the functions below), which records where it stands so that
it resumes after a stop; no worker starts meanwhile.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from processors.events.errors import ModelMismatch
from processors.text.embedding import Vector, embedding_text

_CLAIM = "INSERT INTO embedding_model (model) VALUES ($1) ON CONFLICT (only_row) DO NOTHING"
_READ = "SELECT model, reembedding_to, reembedded_through FROM embedding_model"
_BEGIN = """
UPDATE embedding_model SET reembedding_to = $1, reembedded_through = '', changed_at = now()
WHERE reembedding_to IS DISTINCT FROM $1
"""
_ADVANCE = """
UPDATE embedding_model SET reembedded_through = $2, changed_at = now()
WHERE reembedding_to = $1
"""
_FINISH = """
UPDATE embedding_model
SET model = $1, reembedding_to = NULL, reembedded_through = NULL, changed_at = now()
WHERE reembedding_to = $1
"""


class PostgresEmbeddingModels:
    """What a worker asks of the store's model at start, on the stores' pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def claim(self, model: str) -> None:
        await claim_model(self._pool, model)


@dataclass(frozen=True)
class StoreModel:
    """The model of the store's vectors (None: it holds none yet), and the model a
    re-embedding moves it to with the last record id done ('' before the first)."""

    model: str | None
    reembedding_to: str | None = None
    reembedded_through: str | None = None


async def store_model(connection: asyncpg.Connection | asyncpg.Pool) -> StoreModel:
    row = await connection.fetchrow(_READ)
    if row is None:
        return StoreModel(None)
    return StoreModel(row["model"], row["reembedding_to"], row["reembedded_through"])


async def claim_model(connection: asyncpg.Connection | asyncpg.Pool, model: str) -> None:
    """A worker's check at start: a store that holds no vector yet becomes `model`'s; one
    that holds another model's vectors, or is being re-embedded, refuses it."""
    await connection.execute(_CLAIM, model)
    held = await store_model(connection)
    if held.reembedding_to is not None:
        raise ModelMismatch(
            f"the store is being re-embedded from {held.model} into {held.reembedding_to} "
            f"(done through record {held.reembedded_through!r}): finish it with "
            f"`python -m streams.commands.reembed --model {held.reembedding_to}`, then start "
            f"workers with MEMSTREAM_MODEL={held.reembedding_to}")
    if held.model != model:
        raise ModelMismatch(
            f"the store holds the vectors of {held.model}, this worker embeds with {model}: "
            f"start it with MEMSTREAM_MODEL={held.model}, or move the store to {model} with "
            f"`python -m streams.commands.reembed --model {model}` (workers stopped; "
            "docs/operating.md#changing-the-embedding-model)")


async def begin_reembedding(connection: asyncpg.Connection, model: str) -> str:
    """Start moving the store to `model`, or resume a move to it: the record id after which
    to go on ('' from the start)."""
    await connection.execute(_CLAIM, model)
    await connection.execute(_BEGIN, model)
    held = await store_model(connection)
    return held.reembedded_through or ""


async def advance_reembedding(connection: asyncpg.Connection, model: str,
                              through: str) -> None:
    """Every record up to `through` (in record id order) holds `model`'s vector."""
    await connection.execute(_ADVANCE, model, through)


async def finish_reembedding(connection: asyncpg.Connection, model: str) -> None:
    """Every vector of the store is `model`'s: workers of `model` may start."""
    await connection.execute(_FINISH, model)


# ---------------------------------------------------------------- re-embedding, page by page

_RECORDS_AFTER = """
SELECT record_id, title, text FROM records WHERE record_id > $1 ORDER BY record_id LIMIT $2
"""
_COUNT_AFTER = "SELECT count(*) FROM records WHERE record_id > $1"
_WRITE_RECORD = "UPDATE records SET embedding = $2 WHERE record_id = $1"


async def records_after(connection: asyncpg.Connection, after: str,
                        limit: int) -> list[tuple[str, str]]:
    """The next records in id order, each with the text its vector is made of."""
    rows = await connection.fetch(_RECORDS_AFTER, after, limit)
    return [(row["record_id"], embedding_text(row["title"], row["text"])) for row in rows]


async def records_left(connection: asyncpg.Connection, after: str) -> int:
    count: int = await connection.fetchval(_COUNT_AFTER, after)
    return count


async def store_record_vectors(connection: asyncpg.Connection, model: str,
                               vectors: Sequence[tuple[str, Vector]]) -> None:
    """These records' vectors of `model`, and the move's progress, in one transaction: a
    stop between two pages loses no page and redoes none."""
    if not vectors:
        return
    async with connection.transaction():
        await connection.executemany(_WRITE_RECORD, vectors)
        await advance_reembedding(connection, model, max(record_id for record_id, _ in vectors))

