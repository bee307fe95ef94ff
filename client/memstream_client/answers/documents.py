"""Documents: accepted upserts and deletes, the list, one document with its chunks and versions."""

from __future__ import annotations

from memstream_client.answers.base import Answer, Instant


class DocumentAccepted(Answer):
    """A doc.upsert or doc.delete accepted: the worker applies it (docs/documents.md)."""

    event_id: str
    namespace: str
    doc_id: str


class DocumentSummary(Answer):
    """A document as the list shows it; `deleted` is when it was deleted, if it was."""

    doc_id: str
    title: str | None
    repo: str | None
    security_scope: str | None
    content_type: str
    chunks: int
    version: int
    content_hash: str
    created: Instant
    updated: Instant
    deleted: Instant | None


class DocumentList(Answer):
    namespace: str
    documents: list[DocumentSummary]


class DocumentChunkView(Answer):
    record_id: str
    position: int
    heading_path: list[str]
    token_count: int
    text: str
    added_version: int


class DocumentVersionView(Answer):
    """A version of a document: what it changed among its chunks."""

    version: int
    event_id: str
    change: str
    content_hash: str | None
    chunks: int
    added: int
    kept: int
    removed: int
    applied_at: Instant


class Document(Answer):
    """A document with its live chunks in order and every version it had."""

    namespace: str
    document: DocumentSummary
    chunks: list[DocumentChunkView]
    versions: list[DocumentVersionView]
