"""The documents plane's rules beside the chunker: what record a chunk becomes, and what a
new version of a document changes among its chunks (docs/documents.md)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from memstream_client.events import DocUpsert, Provenance
from memstream_client.ids import doc_chunk_record_id
from processors.documents.chunking import Chunk
from schemas.records import Record


def chunk_record(event: DocUpsert, chunk: Chunk, provenance: Provenance) -> Record:
    """The `doc_chunk` record of a chunk: its heading path as its title (so that what is
    embedded, title then text, is the chunk's embedded text), its document as its source."""
    payload = event.payload
    return Record(
        record_id=doc_chunk_record_id(event.namespace, payload.doc_id, chunk.content_hash),
        namespace=event.namespace,
        record_kind="doc_chunk",
        title=chunk.heading or None,
        text=chunk.text,
        body={"doc_id": payload.doc_id, "doc_title": payload.title,
              "heading_path": list(chunk.heading_path), "position": chunk.position,
              "token_count": chunk.token_count, "content_hash": chunk.content_hash,
              "content_type": payload.content_type, "repo": payload.repo,
              "security_scope": payload.security_scope},
        source_ref=payload.doc_id,
        repo=payload.repo,
        security_scope=payload.security_scope,
        provenance=provenance,
        created_at=event.occurred_at,
    )


@dataclass(frozen=True)
class ChunkPlan:
    """A version's chunks against those the document holds now."""

    # Not among the document's live chunks: embedded (or restored), then indexed.
    new: list[Record]
    # Live already: kept as they are, not embedded again.
    kept: list[Record]


def plan_chunks(records: Sequence[Record], live: Collection[str]) -> ChunkPlan:
    return ChunkPlan([r for r in records if r.record_id not in live],
                     [r for r in records if r.record_id in live])
