"""pgvector's `vector` type as float32 numpy arrays, in its binary wire format."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import asyncpg
import numpy as np
from numpy.typing import NDArray


def encode_vector(vector: Sequence[float] | NDArray[np.floating[Any]]) -> bytes:
    """pgvector's binary format: dimension and a reserved word (uint16 each), then float32s,
    all big-endian."""
    array = np.asarray(vector, dtype=">f4")
    return struct.pack(">HH", array.shape[0], 0) + array.tobytes()


def decode_vector(data: bytes) -> NDArray[np.float32]:
    dim, _ = struct.unpack_from(">HH", data)
    return np.frombuffer(data, dtype=">f4", count=dim, offset=4).astype(np.float32)


async def register_vector_codec(connection: asyncpg.Connection) -> None:
    """Read and write `vector` columns of `connection` as float32 numpy arrays."""
    try:
        await connection.set_type_codec(
            "vector", schema="public", encoder=encode_vector, decoder=decode_vector,
            format="binary",
        )
    except ValueError as exc:  # asyncpg: unknown type
        raise RuntimeError(
            "type `vector` is missing: apply the migrations first (python -m stores.migrate)"
        ) from exc
