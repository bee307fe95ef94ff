"""How memstream's connections read and write Postgres types: pgvector's `vector` as float32
numpy arrays (`Vector`) and `sparsevec` as `SparseVector`s (their binary wire formats),
`jsonb` as Python values."""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from typing import Any

import asyncpg
import numpy as np
from numpy.typing import NDArray

from processors.text.embedding import Vector
from processors.text.lexical import TERM_SPACE, SparseVector


def encode_vector(vector: Sequence[float] | NDArray[np.floating[Any]]) -> bytes:
    """pgvector's binary format: dimension and a reserved word (uint16 each), then float32s,
    all big-endian."""
    array = np.asarray(vector, dtype=">f4")
    return struct.pack(">HH", array.shape[0], 0) + array.tobytes()


def decode_vector(data: bytes) -> Vector:
    dim, _ = struct.unpack_from(">HH", data)
    return np.frombuffer(data, dtype=">f4", count=dim, offset=4).astype(np.float32)


def _compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def encode_sparse(vector: SparseVector) -> bytes:
    """pgvector's binary sparsevec: dimensions, non-zero count, a reserved int (int32 each),
    then the 0-based indices (int32) and the values (float32), all big-endian."""
    count = len(vector.indices)
    return (struct.pack(">iii", TERM_SPACE, count, 0)
            + struct.pack(f">{count}i", *vector.indices)
            + struct.pack(f">{count}f", *vector.values))


def decode_sparse(data: bytes) -> SparseVector:
    _, count, _ = struct.unpack_from(">iii", data)
    return SparseVector(struct.unpack_from(f">{count}i", data, 12),
                        struct.unpack_from(f">{count}f", data, 12 + 4 * count))


async def register_codecs(connection: asyncpg.Connection) -> None:
    """Read and write `vector` columns of `connection` as float32 numpy arrays, `sparsevec`
    columns as `SparseVector`s, `jsonb` as dicts and lists."""
    await connection.set_type_codec(
        "jsonb", schema="pg_catalog", encoder=_compact_json, decoder=json.loads, format="text")
    try:
        await connection.set_type_codec(
            "vector", schema="public", encoder=encode_vector, decoder=decode_vector,
            format="binary",
        )
        await connection.set_type_codec(
            "sparsevec", schema="public", encoder=encode_sparse, decoder=decode_sparse,
            format="binary",
        )
    except ValueError as exc:  # asyncpg: unknown type
        raise RuntimeError(
            "type `vector` is missing: apply the migrations first "
            "(python -m stores.postgres.migrate)"
        ) from exc
