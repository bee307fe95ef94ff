"""`documents.events` → redact → chunk → embed the chunks that changed → the record sink →
the documents ledger (docs/documents.md).

A doc.upsert is chunked (processors/documents/chunking.py, tokens counted by the model's own
tokenizer) and compared with the chunks the document holds now: a chunk is named by its
content, so an unchanged one keeps its record and is not embedded again; a new one is
embedded and stored through the record sink like every record; then the version is applied
in Postgres in one transaction (stores/documents.py), which expires the chunks it no longer
holds and brings back those an earlier version removed, and the sink takes those out of (or
back into) the index and announces them. A doc.delete removes every chunk.

Idempotent by event id: a version already applied is skipped. A worker that dies between
the transaction and the sink's publishing leaves expired records unannounced, which the
retention job publishes (streams/stages/retention.py); new chunks stored but not announced
are stored again, their records kept, by the replay.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import partial

from memstream_client.documents import content_hash
from memstream_client.events import DOCUMENT_EVENT_TYPES, DocDelete, DocumentEvent, DocUpsert
from memstream_client.redaction import redact_secrets
from processors.documents.chunk_records import chunk_record, plan_chunks
from processors.documents.chunking import chunk_document
from processors.events.errors import MemstreamError, Rejection
from schemas.topics import DOCUMENTS_EVENTS
from stores.documents import Applied, ChunkPlace, DocumentVersion
from streams.plumbing.dead_letters import send_dead_letters
from streams.plumbing.failures import Attempts
from streams.plumbing.messages import InboundMessage
from streams.plumbing.runtime import Runtime
from streams.stages.embedding import embedded, start_embedding
from streams.stages.parsing import ParsedBatch, parse_batch
from streams.stages.record_sink import RecordChange, RecordSink

Dead = list[tuple[InboundMessage, Rejection]]


class DocumentIntake:
    """Both stages in order: a version is compared with the one applied before it."""

    def __init__(self, runtime: Runtime, sink: RecordSink) -> None:
        self._runtime = runtime
        self._sink = sink
        self._attempts = runtime.attempts(DOCUMENTS_EVENTS)

    async def prepare(self, messages: Sequence[InboundMessage]
                      ) -> ParsedBatch[DocumentEvent]:
        return parse_batch(self._runtime, messages, DOCUMENT_EVENT_TYPES)

    async def complete(self, batch: ParsedBatch[DocumentEvent]) -> None:
        runtime = self._runtime
        dead = list(batch.rejected)
        events = runtime.metrics.events
        for message, parsed in batch.parsed:
            event = parsed.event
            applied = await self._attempts.until_done(
                partial(runtime.stores.documents.applied_events, event.namespace,
                        [event.event_id]), what="replay check of documents")
            if applied:
                events.labels(DOCUMENTS_EVENTS, event.type, "duplicate").inc()
                continue
            for name, count in parsed.sanitized.items():
                runtime.metrics.sanitized.labels(DOCUMENTS_EVENTS, name).inc(count)
            rejection = await (self._upsert(message, event) if isinstance(event, DocUpsert)
                               else self._delete(message, event))
            if rejection is not None:
                dead.append((message, rejection))
            else:
                events.labels(DOCUMENTS_EVENTS, event.type, "stored").inc()
        await send_dead_letters(runtime, dead)

    async def _upsert(self, message: InboundMessage, event: DocUpsert) -> Rejection | None:
        runtime, payload = self._runtime, event.payload
        with runtime.stage("redact"):
            redacted = redact_secrets(payload.text)
        for kind, count in redacted.found.items():
            runtime.metrics.redactions.labels(kind).inc(count)
        with runtime.stage("chunk"):
            chunks = await asyncio.to_thread(
                chunk_document, payload.doc_id, redacted.text, payload.content_type,
                runtime.embedder.token_costs)
        provenance = message.provenance(event.event_id, event.producer)
        records = [chunk_record(event, chunk, provenance) for chunk in chunks]
        live = await self._attempts.until_done(
            partial(runtime.stores.documents.live_chunk_ids, event.namespace, payload.doc_id),
            what="document lookup")
        plan = plan_chunks(records, live)
        # A chunk an earlier version removed is stored and announced already: the version
        # brings it back below, with its stored vector.
        fresh = await self._attempts.until_done(partial(self._sink.unannounced, plan.new),
                                                what="replay check of chunks")
        todo = [(message, record) for record in plan.new if record.record_id in fresh]
        vectors, failed = await embedded(runtime, self._attempts, todo,
                                         start_embedding(runtime, [r for _, r in todo]))
        if failed:
            return failed[0][1]
        stored = await self._sink.store_new(
            [RecordChange(record, "created", 1, vector, (message,))
             for (_, record), vector in vectors], self._attempts)
        if stored.failed:
            return stored.failed[0][1].rejection
        version = DocumentVersion(
            event.namespace, payload.doc_id, event.event_id, "upserted", payload.content_type,
            payload.title, payload.repo, payload.security_scope, content_hash(redacted.text),
            tuple(ChunkPlace(r.record_id, c.heading_path, c.position, c.token_count)
                  for r, c in zip(records, chunks, strict=True)))
        return await self._applied(message, version, embedded_count=len(stored.done))

    async def _delete(self, message: InboundMessage, event: DocDelete) -> Rejection | None:
        namespace, doc_id = event.namespace, event.payload.doc_id
        known = await self._attempts.until_done(
            partial(self._runtime.stores.documents.document, namespace, doc_id),
            what="document lookup")
        if known is None:
            return Rejection("invalid_event",
                             f"no document {doc_id!r} in {namespace!r} to delete")
        return await self._applied(message, DocumentVersion(
            namespace, doc_id, event.event_id, "deleted", known.content_type),
            embedded_count=0)

    async def _applied(self, message: InboundMessage, version: DocumentVersion,
                       embedded_count: int) -> Rejection | None:
        """Apply the version, then take its removed chunks out of the index and put its
        restored ones back, announcing each."""
        runtime = self._runtime
        try:
            with runtime.stage("postgres"):
                applied = await self._attempts.until_done(
                    partial(runtime.stores.documents.apply, version),
                    what="applying a document version")
        except MemstreamError as error:
            return error.rejection
        if applied is None:
            return None
        published = await _publish(self._sink, self._attempts, message, applied)
        if published is not None:
            return published
        chunks = runtime.metrics.doc_chunks
        chunks.labels("embedded").inc(embedded_count + len(applied.restored))
        chunks.labels("unchanged").inc(applied.kept)
        chunks.labels("removed").inc(len(applied.removed))
        return None


async def _publish(sink: RecordSink, attempts: Attempts, message: InboundMessage,
                   applied: Applied) -> Rejection | None:
    changes = [RecordChange(c.record, "expired", c.version, None, (message,))
               for c in applied.removed]
    changes += [RecordChange(c.record, "restored", c.version, c.vector, (message,))
                for c in applied.restored]
    result = await sink.publish(changes, attempts)
    return result.failed[0][1].rejection if result.failed else None
