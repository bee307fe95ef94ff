-- memstream schema, version 1: the run ledger, records with their vectors and history.
CREATE EXTENSION IF NOT EXISTS vector;

-- Every run event ever accepted; event_id makes a replay a no-op.
CREATE TABLE run_events (
    event_id     text PRIMARY KEY,
    namespace    text        NOT NULL,
    run_id       text        NOT NULL,
    type         text        NOT NULL,
    occurred_at  timestamptz NOT NULL,
    producer     text        NOT NULL,
    payload      jsonb       NOT NULL,
    source_topic text        NOT NULL,
    source_partition integer NOT NULL,
    source_offset    bigint  NOT NULL,
    ingested_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX run_events_run ON run_events (namespace, run_id, occurred_at);

-- One row per record (digest, memory, fix pattern, ...). record_id is derived from the
-- event that created it, so a replay hits the primary key instead of duplicating.
CREATE TABLE records (
    record_id     text PRIMARY KEY,
    namespace     text        NOT NULL,
    record_kind   text        NOT NULL,
    scope         text        NOT NULL DEFAULT 'shared',
    agent_id      text,
    title         text,
    text          text        NOT NULL,
    body          jsonb       NOT NULL DEFAULT '{}'::jsonb,
    memory_type   text,
    tags          text[]      NOT NULL DEFAULT '{}',
    related_ids   text[]      NOT NULL DEFAULT '{}',
    tier          text        NOT NULL DEFAULT 'active',
    review_state  text        NOT NULL DEFAULT 'approved',
    trust_class   text        NOT NULL DEFAULT 'raw',
    source_ref    text,
    run_ref       text,
    provenance    jsonb       NOT NULL DEFAULT '{}'::jsonb,
    source_event_id text      NOT NULL,
    version       integer     NOT NULL DEFAULT 1,
    superseded_by text REFERENCES records (record_id),
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz,
    embedding     vector(384),
    -- Set once the record is in the index and announced on memory.updated; a replay of a
    -- record that has it set is skipped whole.
    announced_at  timestamptz
);
CREATE INDEX records_namespace_kind ON records (namespace, record_kind, created_at DESC);
CREATE INDEX records_unannounced ON records (namespace) WHERE announced_at IS NULL;

-- Every version a record has had, the current one included.
CREATE TABLE record_versions (
    record_id  text        NOT NULL REFERENCES records (record_id),
    version    integer     NOT NULL,
    text       text        NOT NULL,
    body       jsonb       NOT NULL,
    event_id   text        NOT NULL,
    changed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (record_id, version)
);
