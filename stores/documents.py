"""The documents plane's ledger: each document a namespace indexes, its versions, and its
chunks with their history (docs/documents.md). The chunks themselves are records of kind
`doc_chunk`, stored and indexed by the record sink like every record; this store says which
of them make a document now, and expires those a new version no longer holds.

`Documents` is the contract the documents stage and routes use; `PostgresDocuments` keeps it
in the source of truth."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

import asyncpg

from processors.memory.lifecycle import version_fields
from processors.text.embedding import Vector
from schemas.records import Record
from stores.postgres.rows import record_of

DocumentChange = Literal["upserted", "deleted"]


@dataclass(frozen=True)
class ChunkPlace:
    """Where a chunk (its record) sits in a version of its document."""

    record_id: str
    heading_path: tuple[str, ...]
    position: int
    token_count: int


@dataclass(frozen=True)
class DocumentVersion:
    """A version to apply: an upsert's whole set of chunks, or a delete (no chunks)."""

    namespace: str
    doc_id: str
    event_id: str
    change: DocumentChange
    content_type: str
    title: str | None = None
    repo: str | None = None
    security_scope: str | None = None
    content_hash: str | None = None
    chunks: tuple[ChunkPlace, ...] = ()


@dataclass(frozen=True)
class ChangedChunk:
    """A chunk record whose live state the version changed, at its new record version."""

    record: Record
    version: int
    # Its stored embedding: a restored chunk goes back into the index with it.
    vector: Vector | None


@dataclass(frozen=True)
class Applied:
    version: int
    added: int
    kept: int
    # Chunks the version no longer holds: their records expired.
    removed: list[ChangedChunk]
    # Chunks that had been removed by an earlier version and are back: their records live
    # again.
    restored: list[ChangedChunk]


@dataclass(frozen=True)
class DocumentRow:
    namespace: str
    doc_id: str
    title: str | None
    repo: str | None
    security_scope: str | None
    content_type: str
    version: int
    content_hash: str
    chunks: int
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None


@dataclass(frozen=True)
class DocumentChunk:
    """A live chunk of a document as its page shows it."""

    record_id: str
    heading_path: tuple[str, ...]
    position: int
    token_count: int
    text: str
    added_version: int


@dataclass(frozen=True)
class DocumentVersionRow:
    version: int
    event_id: str
    change: DocumentChange
    content_hash: str | None
    chunks: int
    added: int
    kept: int
    removed: int
    applied_at: datetime


class Documents(Protocol):
    async def applied_events(self, namespace: str, event_ids: Sequence[str]) -> set[str]:
        """The event ids among these whose version is applied already."""

    async def live_chunk_ids(self, namespace: str, doc_id: str) -> set[str]:
        """The record ids of the chunks the document's current version holds."""

    async def apply(self, version: DocumentVersion) -> Applied | None:
        """Apply a version in one transaction: the document's row, its version, its chunk
        rows; the chunks it no longer holds are removed and their records expired, those back
        from an earlier removal live again. None when its event was applied already. Every
        chunk of an upsert must be stored as a record first."""

    async def list_documents(self, namespace: str, repo: str | None,
                             include_deleted: bool) -> list[DocumentRow]:
        """The namespace's documents (of one repo), by doc id."""

    async def document(self, namespace: str, doc_id: str) -> DocumentRow | None: ...

    async def chunks(self, namespace: str, doc_id: str) -> list[DocumentChunk]:
        """The document's live chunks, in order."""

    async def versions(self, namespace: str, doc_id: str) -> list[DocumentVersionRow]:
        """Every version of the document, oldest first."""


_EXPIRE_REMOVED = """
    UPDATE records SET expired_at = now(), version = version + 1, updated_at = now(),
           announced_at = NULL
    WHERE namespace = $1 AND record_id = ANY($2::text[]) AND expired_at IS NULL
    RETURNING *
"""
_RESTORE = """
    UPDATE records SET expired_at = NULL, version = version + 1, updated_at = now(),
           announced_at = NULL
    WHERE namespace = $1 AND record_id = ANY($2::text[]) AND expired_at IS NOT NULL
    RETURNING *
"""


class PostgresDocuments:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def applied_events(self, namespace: str, event_ids: Sequence[str]) -> set[str]:
        rows = await self._pool.fetch(
            "SELECT event_id FROM document_versions WHERE namespace = $1"
            " AND event_id = ANY($2::text[])", namespace, list(event_ids))
        return {row["event_id"] for row in rows}

    async def live_chunk_ids(self, namespace: str, doc_id: str) -> set[str]:
        rows = await self._pool.fetch(
            "SELECT record_id FROM document_chunks WHERE namespace = $1 AND doc_id = $2"
            " AND removed_at IS NULL", namespace, doc_id)
        return {row["record_id"] for row in rows}

    async def apply(self, version: DocumentVersion) -> Applied | None:
        async with self._pool.acquire() as connection, connection.transaction():
            # One document's versions one at a time, whichever worker applies them.
            await connection.execute("SELECT pg_advisory_xact_lock(hashtext($1 || '/' || $2))",
                                     version.namespace, version.doc_id)
            if await connection.fetchval(
                    "SELECT 1 FROM document_versions WHERE namespace = $1 AND event_id = $2",
                    version.namespace, version.event_id):
                return None
            return await _apply(connection, version)

    async def list_documents(self, namespace: str, repo: str | None,
                             include_deleted: bool) -> list[DocumentRow]:
        rows = await self._pool.fetch(
            "SELECT * FROM documents WHERE namespace = $1"
            " AND ($2::text IS NULL OR repo = $2) AND ($3 OR deleted_at IS NULL)"
            " ORDER BY doc_id", namespace, repo, include_deleted)
        return [_document_of(row) for row in rows]

    async def document(self, namespace: str, doc_id: str) -> DocumentRow | None:
        row = await self._pool.fetchrow(
            "SELECT * FROM documents WHERE namespace = $1 AND doc_id = $2", namespace, doc_id)
        return None if row is None else _document_of(row)

    async def chunks(self, namespace: str, doc_id: str) -> list[DocumentChunk]:
        rows = await self._pool.fetch(
            "SELECT c.*, r.text FROM document_chunks c JOIN records r USING (record_id)"
            " WHERE c.namespace = $1 AND c.doc_id = $2 AND c.removed_at IS NULL"
            " ORDER BY c.position", namespace, doc_id)
        return [DocumentChunk(row["record_id"], tuple(row["heading_path"]), row["position"],
                              row["token_count"], row["text"], row["added_version"])
                for row in rows]

    async def versions(self, namespace: str, doc_id: str) -> list[DocumentVersionRow]:
        rows = await self._pool.fetch(
            "SELECT * FROM document_versions WHERE namespace = $1 AND doc_id = $2"
            " ORDER BY version", namespace, doc_id)
        return [DocumentVersionRow(row["version"], row["event_id"], row["change"],
                                   row["content_hash"], row["chunks"], row["added"],
                                   row["kept"], row["removed"], row["applied_at"])
                for row in rows]


async def _apply(connection: asyncpg.Connection, version: DocumentVersion) -> Applied:
    namespace, doc_id = version.namespace, version.doc_id
    number = int(await connection.fetchval(
        "SELECT COALESCE(max(version), 0) + 1 FROM document_versions"
        " WHERE namespace = $1 AND doc_id = $2", namespace, doc_id))
    live = {row["record_id"] for row in await connection.fetch(
        "SELECT record_id FROM document_chunks WHERE namespace = $1 AND doc_id = $2"
        " AND removed_at IS NULL", namespace, doc_id)}
    wanted = {chunk.record_id for chunk in version.chunks}
    gone = sorted(live - wanted)
    await connection.execute(
        "UPDATE document_chunks SET removed_version = $3, removed_at = now()"
        " WHERE namespace = $1 AND doc_id = $2 AND record_id = ANY($4::text[])",
        namespace, doc_id, number, gone)
    await connection.executemany(
        """
        INSERT INTO document_chunks (namespace, doc_id, record_id, heading_path, position,
                                     token_count, added_version)
        VALUES ($1, $2, $3, $4, $5, $6, $7)
        ON CONFLICT (namespace, doc_id, record_id) DO UPDATE SET
            heading_path = EXCLUDED.heading_path, position = EXCLUDED.position,
            token_count = EXCLUDED.token_count,
            added_version = CASE WHEN document_chunks.removed_at IS NULL
                                 THEN document_chunks.added_version ELSE EXCLUDED.added_version
                            END,
            removed_version = NULL, removed_at = NULL
        """,
        [(namespace, doc_id, c.record_id, list(c.heading_path), c.position, c.token_count,
          number) for c in version.chunks])
    removed = await _changed(connection, _EXPIRE_REMOVED, namespace, gone, "expired",
                             f"doc:{version.event_id}")
    restored = await _changed(connection, _RESTORE, namespace, sorted(wanted - live),
                              "restored", f"doc:{version.event_id}")
    deleted = version.change == "deleted"
    await connection.execute(
        """
        INSERT INTO documents (namespace, doc_id, title, repo, security_scope, content_type,
                               version, content_hash, chunks, deleted_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7, COALESCE($8, ''), $9,
                CASE WHEN $10 THEN now() END)
        ON CONFLICT (namespace, doc_id) DO UPDATE SET
            title = CASE WHEN $10 THEN documents.title ELSE EXCLUDED.title END,
            repo = CASE WHEN $10 THEN documents.repo ELSE EXCLUDED.repo END,
            security_scope = CASE WHEN $10 THEN documents.security_scope
                                  ELSE EXCLUDED.security_scope END,
            content_type = CASE WHEN $10 THEN documents.content_type
                                ELSE EXCLUDED.content_type END,
            content_hash = COALESCE($8, documents.content_hash),
            version = EXCLUDED.version, chunks = EXCLUDED.chunks, updated_at = now(),
            deleted_at = EXCLUDED.deleted_at
        """,
        namespace, doc_id, version.title, version.repo, version.security_scope,
        version.content_type, number, version.content_hash, len(version.chunks), deleted)
    added = len(wanted - live)
    await connection.execute(
        "INSERT INTO document_versions (namespace, doc_id, version, event_id, change,"
        " content_hash, title, chunks, added, kept, removed)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        namespace, doc_id, number, version.event_id, version.change, version.content_hash,
        version.title, len(version.chunks), added, len(wanted & live), len(gone))
    return Applied(number, added, len(wanted & live), removed, restored)


async def _changed(connection: asyncpg.Connection, statement: str, namespace: str,
                   record_ids: Sequence[str], change: str, event_id: str
                   ) -> list[ChangedChunk]:
    """Expire or restore chunk records, each change a version of the record."""
    rows = await connection.fetch(statement, namespace, list(record_ids))
    records = [ChangedChunk(record_of(row), int(row["version"]), row["embedding"])
               for row in rows]
    await connection.executemany(
        "INSERT INTO record_versions (record_id, version, text, body, fields, change, actor,"
        " event_id, changed_at, changed, reason, namespace)"
        " VALUES ($1, $2, $3, $4, $5, $6, 'documents', $7, now(), '{}', $8, $9)",
        [(c.record.record_id, c.version, c.record.text, c.record.body,
          version_fields(c.record), change, event_id,
          "the document's new version no longer holds it" if change == "expired"
          else "the document holds it again", namespace) for c in records])
    return records


def _document_of(row: Any) -> DocumentRow:
    return DocumentRow(row["namespace"], row["doc_id"], row["title"], row["repo"],
                       row["security_scope"], row["content_type"], row["version"],
                       row["content_hash"], row["chunks"], row["created_at"],
                       row["updated_at"], row["deleted_at"])
