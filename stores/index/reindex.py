"""Rebuild the retrieval index from Postgres, the source of truth.

    python -m stores.index.reindex [--dsn DSN] [--index URL] [--namespace NS] [--no-prune]

Every live record (not superseded, not deprecated) with an embedding is upserted, in batches,
with the payload of stores.index.payload, and its entities are read again (stores/entities.py,
the other index derived from the records; a record stored before confidence was kept gets
it); then index points whose record is no longer live are deleted (`--no-prune` keeps them).
Upserts overwrite (deterministic point ids), so a rebuild can run over a populated index.
Records without an embedding are counted and left out, unless the Python API is given an
`embed` function: then they are embedded, written back to Postgres and indexed.

The embedded engine (edge://) admits one process at a time: stop the worker first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import asyncpg
import numpy as np
from numpy.typing import NDArray
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from processors.knowledge.entities import entities_in
from processors.text.embedding import embedding_text
from processors.text.lexical import (
    SparseVector,
    context_texts,
    document_vector,
    restatement_texts,
    term_presence,
)
from stores.entities import index_record_entities
from stores.index.factory import DEFAULT_INDEX_URL, open_index
from stores.index.payload import index_payload
from stores.index.postgres_search import INDEXED
from stores.index.protocol import IndexPoint, VectorIndex
from stores.index.qdrant_edge import EdgeIndex
from stores.postgres.codecs import register_codecs
from stores.postgres.rows import RECORD_COLUMNS, refresh_confidence

INDEX_URL_ENV = "MEMSTREAM_INDEX_URL"

Embed = Callable[[list[str]], NDArray[np.floating[Any]]]

_SELECT_LIVE = f"""
SELECT {RECORD_COLUMNS}, version, term_presence IS NULL AS presence_missing
FROM records
WHERE {INDEXED} AND ($1::text IS NULL OR namespace = $1) AND record_id > $2
ORDER BY record_id
LIMIT $3
"""
_STILL_LIVE = f"SELECT record_id FROM records WHERE record_id = ANY($1::text[]) AND {INDEXED}"
_WRITE_BACK = "UPDATE records SET embedding = $2 WHERE record_id = $1 AND embedding IS NULL"
_WRITE_BACK_PRESENCE = (
    "UPDATE records SET term_presence = $2 WHERE record_id = $1 AND term_presence IS NULL"
)
_WRITE_BACK_LEXICAL = (
    "UPDATE records SET lexical = $2, lexical_terms = $3 WHERE record_id = $1 AND lexical IS NULL"
)
# A restated record's words, from its texts as of the version read: a version saved meanwhile
# computed its own.
_REFRESH_RESTATED = (
    "UPDATE records SET lexical = $2, lexical_terms = $3, term_presence = $4"
    " WHERE record_id = $1 AND version = $5"
)


@dataclass
class ReindexReport:
    indexed: int = 0
    embedded: int = 0  # had no embedding; embedded by `embed` and written back
    missing_embedding: int = 0  # had no embedding and no `embed` was given: not indexed
    pruned: int = 0
    # Records whose entities were read again (stores/entities.py), and whose confidence was
    # computed for the first time (stored before it was kept).
    entities_indexed: int = 0
    confidence_filled: int = 0
    # Records stored before their term presence was kept (migration 0026), given it.
    presence_filled: int = 0
    # Records holding restatements whose stored words lacked them (stored before a
    # restatement's words joined its twin's lexical vector), given them.
    restated_refreshed: int = 0
    seconds: float = 0.0


async def reindex(
    dsn: str,
    index: VectorIndex,
    *,
    namespace: str | None = None,
    batch_size: int = 512,
    embed: Embed | None = None,
    prune: bool = True,
) -> ReindexReport:
    """Upsert every live record of `namespace` (or of all) into `index`, which must be open
    (`ensure_collection()` done); with `prune`, delete the points of records no longer live.

    Reads page by page on the primary key rather than in one long snapshot, so a worker
    writing meanwhile is raced by milliseconds per page, not by the whole rebuild."""
    started = time.monotonic()
    report = ReindexReport()
    live_ids: set[str] = set()
    connection = await connect_with_vectors(dsn)
    try:
        after = ""
        while True:
            rows = await connection.fetch(_SELECT_LIVE, namespace, after, batch_size)
            if not rows:
                break
            after = rows[-1]["record_id"]
            live_ids.update(row["record_id"] for row in rows)
            lexical, refreshed = await _lexical_vectors(connection, rows)
            report.restated_refreshed += refreshed
            with_vector = [row for row in rows if row["embedding"] is not None]
            without = [row for row in rows if row["embedding"] is None]
            points = [IndexPoint(row["record_id"], row["embedding"], index_payload(row),
                                 lexical[row["record_id"]])
                      for row in with_vector]
            if without and embed is not None:
                points += await _embed_and_write_back(connection, without, embed, lexical)
                report.embedded += len(without)
            else:
                report.missing_embedding += len(without)
            await index.upsert(points)
            report.indexed += len(points)
            async with connection.transaction():
                await index_record_entities(connection, [entities_in(
                    row["namespace"], row["record_id"], int(row["version"]), row["text"],
                    title=row["title"], tags=row["tags"], agent_id=row["agent_id"])
                    for row in rows])
                for namespace_of_rows, ids in _unscored(rows).items():
                    await refresh_confidence(connection, namespace_of_rows, ids)
                report.presence_filled += await _fill_presence(connection, rows)
            report.entities_indexed += len(rows)
            report.confidence_filled += sum(row["confidence"] is None for row in rows)
        if prune:
            report.pruned = await _prune(connection, index, namespace, live_ids)
    finally:
        await connection.close()
    report.seconds = round(time.monotonic() - started, 3)
    return report


def _unscored(rows: Sequence[asyncpg.Record]) -> dict[str, list[str]]:
    """The records stored before confidence was kept, by namespace."""
    found: dict[str, list[str]] = {}
    for row in rows:
        if row["confidence"] is None:
            found.setdefault(row["namespace"], []).append(row["record_id"])
    return found


async def _fill_presence(connection: asyncpg.Connection,
                         rows: Sequence[asyncpg.Record]) -> int:
    """Keep the term presence of the records stored before it was kept: what search reads
    instead of tokenizing their texts at every query."""
    missing = [row for row in rows if row["presence_missing"] and not _restated(row)]
    await connection.executemany(_WRITE_BACK_PRESENCE, [
        (row["record_id"], SparseVector.of(term_presence(
            row["text"], row["title"], context_texts(row["body"] or {}), row["created_at"],
            restatement_texts(row["body"] or {}))))
        for row in missing])
    return len(missing)


def _restated(row: asyncpg.Record) -> bool:
    return bool(restatement_texts(row["body"] or {}))


async def _refresh_restated(connection: asyncpg.Connection, rows: Sequence[asyncpg.Record],
                            ) -> tuple[dict[str, SparseVector], int]:
    """The lexical vectors of the records that hold restatements, from their texts, written
    back with their term presence where the stored ones differ: a record restated before
    its restatements' words joined its lexical vector is found by them after a rebuild; and
    how many were written back."""
    vectors: dict[str, SparseVector] = {}
    stale = []
    for row in rows:
        if not _restated(row):
            continue
        texts = (row["text"], row["title"], context_texts(row["body"]), row["created_at"],
                 restatement_texts(row["body"]))
        vector = vectors[row["record_id"]] = document_vector(*texts)
        presence = SparseVector.of(term_presence(*texts))
        # Stored as float4: the terms held tell a vector without the restatements' words.
        if row["lexical"] is None or tuple(row["lexical"].indices) != vector.indices \
                or row["presence_missing"]:
            stale.append((row["record_id"], vector, list(vector.indices), presence,
                          row["version"]))
    await connection.executemany(_REFRESH_RESTATED, stale)
    return vectors, len(stale)


async def _lexical_vectors(connection: asyncpg.Connection,
                           rows: Sequence[asyncpg.Record]) -> tuple[dict[str, SparseVector], int]:
    """The records' lexical vectors: stored, or computed (records older than hybrid search,
    and the restated ones: `_refresh_restated`) and written back; and how many restated
    records were refreshed."""
    vectors, refreshed = await _refresh_restated(connection, rows)
    missing = []
    for row in rows:
        if row["record_id"] in vectors:
            continue
        if row["lexical"] is not None:
            vectors[row["record_id"]] = row["lexical"]
        else:
            vectors[row["record_id"]] = document_vector(
                row["text"], row["title"], context_texts(row["body"] or {}), row["created_at"],
                restatement_texts(row["body"] or {}))
            missing.append(row["record_id"])
    await connection.executemany(_WRITE_BACK_LEXICAL, [
        (record_id, vectors[record_id], list(vectors[record_id].indices))
        for record_id in missing])
    return vectors, refreshed


async def _embed_and_write_back(
    connection: asyncpg.Connection, rows: Sequence[asyncpg.Record], embed: Embed,
    lexical: dict[str, SparseVector],
) -> list[IndexPoint]:
    texts = [embedding_text(row["title"], row["text"]) for row in rows]
    # Model inference is CPU-bound native code that releases the GIL: keep it off the loop.
    vectors = np.asarray(await asyncio.to_thread(embed, texts), dtype=np.float32)
    if vectors.shape[0] != len(rows):
        raise ValueError(f"embed returned {vectors.shape[0]} vectors for {len(rows)} texts")
    # Postgres stays the source of truth: the next rebuild must not need the model again.
    await connection.executemany(
        _WRITE_BACK, [(row["record_id"], vector) for row, vector in zip(rows, vectors, strict=True)]
    )
    return [IndexPoint(row["record_id"], vector, index_payload(row), lexical[row["record_id"]])
            for row, vector in zip(rows, vectors, strict=True)]


async def _prune(
    connection: asyncpg.Connection, index: VectorIndex, namespace: str | None, live_ids: set[str]
) -> int:
    # Collect first, delete after: deleting while scrolling would shift the scroll's pages.
    candidates: list[str] = []
    async for ids in index.iter_record_ids(namespace):
        candidates.extend(i for i in ids if i not in live_ids)
    stale: list[str] = []
    for start in range(0, len(candidates), 1000):
        chunk = candidates[start : start + 1000]
        # Records the worker created after we read their page are live, not stale.
        now_live = {row["record_id"] for row in await connection.fetch(_STILL_LIVE, chunk)}
        stale.extend(i for i in chunk if i not in now_live)
    for start in range(0, len(stale), 1000):
        await index.delete(stale[start : start + 1000])
    return len(stale)


async def connect_with_vectors(dsn: str) -> asyncpg.Connection:
    """A connection with memstream's codecs (stores.postgres.codecs)."""
    connection: asyncpg.Connection = await asyncpg.connect(dsn)
    try:
        await register_codecs(connection)
    except RuntimeError:
        await connection.close()
        raise
    return connection


async def rebuild(dsn: str, index_url: str, *, namespace: str | None = None,
                  prune: bool = True) -> ReindexReport:
    """Open the index behind `index_url`, rebuild it from the records of `dsn` (`reindex`),
    and close it."""
    index = open_index(index_url, pg_dsn=dsn)
    await index.ensure_collection()
    try:
        report = await reindex(dsn, index, namespace=namespace, prune=prune)
        if isinstance(index, EdgeIndex):
            # The embedded engine has no background optimizer; a rebuild, offline, is the
            # moment to merge segments and drop deleted points.
            await index.optimize()
        return report
    finally:
        await index.close()


def main(argv: Sequence[str] | None = None) -> int:
    from stores.postgres.migrate import default_dsn

    parser = argparse.ArgumentParser(prog="python -m stores.index.reindex", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", default=None,
                        help="default: $MEMSTREAM_PG_DSN, else the local server")
    parser.add_argument("--index", default=os.environ.get(INDEX_URL_ENV, DEFAULT_INDEX_URL),
                        help=f"default: ${INDEX_URL_ENV}, else {DEFAULT_INDEX_URL}")
    parser.add_argument("--namespace", default=None, help="only this namespace")
    parser.add_argument("--no-prune", dest="prune", action="store_false",
                        help="keep index points whose record is no longer live")
    args = parser.parse_args(argv)
    args.dsn = args.dsn or default_dsn()
    try:
        report = asyncio.run(rebuild(args.dsn, args.index, namespace=args.namespace,
                                     prune=args.prune))
    except (OSError, asyncpg.PostgresError) as exc:
        print(f"error: Postgres at {args.dsn}: {exc}\n"
              "(local server: python -m stores.postgres.local_server start)", file=sys.stderr)
        return 1
    except (ResponseHandlingException, UnexpectedResponse) as exc:
        print(f"error: Qdrant at {args.index}: {exc}", file=sys.stderr)
        return 1
    except RuntimeError as exc:  # EdgeIndexError, missing `vector` type
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(asdict(report)))
    if report.missing_embedding:
        print(f"warning: {report.missing_embedding} live records have no embedding and were "
              "not indexed; re-embed them (reindex(..., embed=...))", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
