"""Documents over HTTP (docs/documents.md): index a document, delete one, list them, read
one's chunks.

    POST /v1/documents                 {namespace, doc_id, text, title?, content_type?,
                                        repo?, security_scope?, event_id?}
    POST /v1/documents/delete          {namespace, doc_id, event_id?}
    GET  /v1/documents?namespace=&repo=&include_deleted=
    GET  /v1/documents/{doc_id}?namespace=      (doc_id percent-encoded: guide%2Finstall.md)

Each POST publishes a doc.upsert or doc.delete to `documents.events`, checked as the
document stage will check it (400 with the reason its dead letter would carry; 413 for a
body over the event size limit); the stage applies it
(streams/stages/memory/document_intake.py). Documents are shared: any key that reads the namespace
reads them, and a key that writes it indexes and deletes them.
"""

from __future__ import annotations

from faust.web import Request, Response, View

from memstream_client.answers.documents import (
    Document,
    DocumentAccepted,
    DocumentChunkView,
    DocumentList,
    DocumentSummary,
    DocumentVersionView,
)
from memstream_client.events import DocDelete, DocUpsert
from processors.api.access import Caller
from processors.api.openapi import payload_body
from processors.api.parameters import BOOLEAN, DOC_ID, REPO
from processors.events.errors import Rejected
from processors.events.intake import json_object
from stores.documents import DocumentChunk, DocumentRow, DocumentVersionRow
from streams.api.auth import granted_namespace
from streams.api.pages import Pages, ViewHandler
from streams.api.params import NAMESPACE_PARAMS, NO_PARAMS, Param, Params, optional, value
from streams.api.publishing import (
    POST,
    EventGate,
    answering,
    envelope_of,
    payload_fields,
    permitted,
)
from streams.plumbing.runtime import Runtime

LIST_PARAMS: Params = {**NAMESPACE_PARAMS, "repo": Param(REPO),
                       "include_deleted": Param(BOOLEAN)}
DOCUMENT_PARAMS: Params = {**NAMESPACE_PARAMS, "doc_id": Param(DOC_ID)}


class DocumentViews:
    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._gate = EventGate(runtime.producer, runtime.max_event_bytes)

    async def _publish(self, web: View, request: Request, caller: Caller,
                       event_type: str, model: type[DocUpsert] | type[DocDelete]
                       ) -> Response | DocumentAccepted:
        try:
            body = json_object(await request.read(), self._runtime.max_event_bytes)
            permitted(caller, body, "write")
            raw, checked = self._gate.checked(
                envelope_of(event_type, body, payload_fields(body), caller), {event_type: model})
        except Rejected as exc:
            if exc.reason != "oversized":
                raise
            return web.json({"error": exc.detail, "reason": exc.reason}, status=413)
        event = checked.event
        published = await self._gate.publish(raw, event)
        return DocumentAccepted(event_id=published.event_id, namespace=event.namespace,
                                doc_id=event.payload.doc_id)

    async def upsert(self, web: View, request: Request,
                     caller: Caller) -> Response | DocumentAccepted:
        """Index a document, or a new version of one (published as doc.upsert)."""
        return await self._publish(web, request, caller, "doc.upsert", DocUpsert)

    async def delete(self, web: View, request: Request,
                     caller: Caller) -> Response | DocumentAccepted:
        """Take a document out of the index (published as doc.delete)."""
        return await self._publish(web, request, caller, "doc.delete", DocDelete)

    async def listing(self, web: View, request: Request, caller: Caller) -> DocumentList:
        """The namespace's documents (of one repo), by doc id."""
        namespace = granted_namespace(caller, request.query)
        found = await self._runtime.stores.documents.list_documents(
            namespace, optional(request.query, "repo", REPO),
            value(request.query, "include_deleted", BOOLEAN, False))
        return DocumentList(namespace=namespace,
                            documents=[document_view(row) for row in found])

    async def document(self, web: View, request: Request, caller: Caller,
                       doc_id: str) -> Response | Document:
        """A document: its live chunks in order, and its versions."""
        namespace = granted_namespace(caller, request.query)
        store = self._runtime.stores.documents
        row = await store.document(namespace, doc_id)
        if row is None:
            return web.json({"error": f"no document {doc_id!r} in {namespace!r}"},
                            status=404)
        return Document(namespace=namespace, document=document_view(row),
                        chunks=[chunk_view(c) for c in await store.chunks(namespace, doc_id)],
                        versions=[version_view(v)
                                  for v in await store.versions(namespace, doc_id)])


def document_view(row: DocumentRow) -> DocumentSummary:
    return DocumentSummary(
        doc_id=row.doc_id, title=row.title, repo=row.repo, security_scope=row.security_scope,
        content_type=row.content_type, chunks=row.chunks, version=row.version,
        content_hash=row.content_hash, created=row.created_at, updated=row.updated_at,
        deleted=row.deleted_at)


def chunk_view(chunk: DocumentChunk) -> DocumentChunkView:
    return DocumentChunkView(record_id=chunk.record_id, position=chunk.position,
                             heading_path=list(chunk.heading_path),
                             token_count=chunk.token_count, text=chunk.text,
                             added_version=chunk.added_version)


def version_view(version: DocumentVersionRow) -> DocumentVersionView:
    return DocumentVersionView(version=version.version, event_id=version.event_id,
                               change=version.change, content_hash=version.content_hash,
                               chunks=version.chunks, added=version.added, kept=version.kept,
                               removed=version.removed, applied_at=version.applied_at)


def wire_documents(pages: Pages, runtime: Runtime) -> None:
    views = DocumentViews(runtime)
    # The first route that matches a path serves it: delete before /v1/documents/{doc_id}.
    pages.page("/v1/documents/delete", params=NO_PARAMS, methods=POST, answer=DocumentAccepted,
               body=payload_body(DocDelete))(answering(views.delete))
    pages.page("/v1/documents", params=LIST_PARAMS, methods=("GET", "POST"),
               answer={"GET": DocumentList, "POST": DocumentAccepted},
               body=payload_body(DocUpsert))(answering(dispatch(views)))
    pages.page("/v1/documents/{doc_id}", params=DOCUMENT_PARAMS,
               answer=Document)(views.document)


def dispatch(views: DocumentViews) -> ViewHandler:
    """One route, two methods: GET lists, POST indexes."""

    async def documents(web: View, request: Request,
                        caller: Caller) -> Response | DocumentAccepted | DocumentList:
        """List the namespace's documents (GET), or index one (POST, a doc.upsert)."""
        if request.method == "POST":
            return await views.upsert(web, request, caller)
        return await views.listing(web, request, caller)

    return documents
