"""The index behind a URL or path: which backend, opened how.

    open_index("edge://var/qdrant-edge")    Qdrant's embedded engine (qdrant-edge-py), on disk;
                                            one process at a time (the default of `make run`)
    open_index("var/qdrant-edge")           the same
    open_index("http://localhost:6333")     a Qdrant server (qdrant-client)
    open_index("local://var/qdrant-local")  qdrant-client's local mode, on disk
    open_index(":memory:")                  qdrant-client's local mode, in memory
    open_index("pg://", pg_dsn=DSN)         pgvector in the records' own Postgres, shared by
                                            any number of workers
    open_index("postgresql://…")            pgvector in another Postgres
"""

from __future__ import annotations

from pathlib import Path

from stores.index.pgvector import PostgresIndex
from stores.index.protocol import DEFAULT_COLLECTION, DIM, VectorIndex
from stores.index.qdrant_edge import EdgeIndex
from stores.index.qdrant_server import QdrantClientIndex

# The embedded engine under the repository's var/, the default of `make run`.
DEFAULT_INDEX_URL = f"edge://{Path(__file__).resolve().parent.parent / 'var' / 'qdrant-edge'}"


def open_index(
    url_or_path: str,
    *,
    pg_dsn: str | None = None,
    collection: str = DEFAULT_COLLECTION,
    dim: int = DIM,
    api_key: str | None = None,
) -> VectorIndex:
    """The index behind a URL or path (see the module docstring); `pg_dsn` is the records'
    database, for `pg://`. Nothing is opened or created until `ensure_collection()`."""
    if url_or_path == "pg://":
        if not pg_dsn:
            raise ValueError("pg:// is the records' own Postgres: pass its DSN")
        return PostgresIndex(pg_dsn, collection=collection, dim=dim)
    if url_or_path.startswith(("postgresql://", "postgres://")):
        return PostgresIndex(url_or_path, collection=collection, dim=dim)
    if url_or_path.startswith(("http://", "https://")):
        return QdrantClientIndex.for_server(url_or_path, collection=collection, dim=dim,
                                            api_key=api_key)
    if url_or_path == ":memory:" or url_or_path.startswith("local://"):
        location = url_or_path.removeprefix("local://")
        if not location:
            raise ValueError("local:// needs a path, e.g. local://var/qdrant-local")
        return QdrantClientIndex.local(location, collection=collection, dim=dim)
    if "://" in url_or_path and not url_or_path.startswith("edge://"):
        raise ValueError(f"unknown index URL scheme: {url_or_path!r}")
    path = url_or_path.removeprefix("edge://")
    if not path:
        raise ValueError("edge:// needs a path, e.g. edge://var/qdrant-edge")
    return EdgeIndex(path, collection=collection, dim=dim)
