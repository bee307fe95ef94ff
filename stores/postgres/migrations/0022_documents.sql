-- memstream schema, version 22: the documents plane (docs/documents.md). Each document a
-- namespace indexes, its versions (one per doc.upsert or doc.delete applied, once by event
-- id), and its chunks with their history: the version that added a chunk and the one that
-- removed it. A chunk is also a record of kind doc_chunk (records), which is what search
-- and the index hold; a removed chunk's record is expired, and kept.
CREATE TABLE documents (
    namespace      text        NOT NULL,
    doc_id         text        NOT NULL,
    title          text,
    repo           text,
    security_scope text,
    content_type   text        NOT NULL,
    version        integer     NOT NULL,
    content_hash   text        NOT NULL,
    chunks         integer     NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    deleted_at     timestamptz,
    PRIMARY KEY (namespace, doc_id)
);
CREATE INDEX documents_by_repo ON documents (namespace, repo, doc_id);

CREATE TABLE document_versions (
    namespace    text        NOT NULL,
    doc_id       text        NOT NULL,
    version      integer     NOT NULL,
    event_id     text        NOT NULL,
    change       text        NOT NULL CHECK (change IN ('upserted', 'deleted')),
    content_hash text,
    title        text,
    chunks       integer     NOT NULL,
    added        integer     NOT NULL,
    kept         integer     NOT NULL,
    removed      integer     NOT NULL,
    applied_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, doc_id, version),
    UNIQUE (namespace, event_id)
);

CREATE TABLE document_chunks (
    namespace       text        NOT NULL,
    doc_id          text        NOT NULL,
    record_id       text        NOT NULL REFERENCES records (record_id),
    heading_path    text[]      NOT NULL,
    position        integer     NOT NULL,
    token_count     integer     NOT NULL,
    added_version   integer     NOT NULL,
    removed_version integer,
    removed_at      timestamptz,
    PRIMARY KEY (namespace, doc_id, record_id)
);
CREATE INDEX document_chunks_live ON document_chunks (namespace, doc_id, position)
    WHERE removed_at IS NULL;
