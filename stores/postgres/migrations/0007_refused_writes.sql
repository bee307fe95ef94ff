-- memstream schema, version 7: writes refused as not worth retaining (processors/refusal.py).

-- One row per refused memory.write: it was valid, so it is no dead letter, and nothing of
-- it is stored as a record, embedded or indexed. The text is not kept: the event stays at
-- its source offset for as long as the topic retains it. record_id is the id the record
-- would have had; announced_at is set once memory.updated has the refusal.
CREATE TABLE refused_writes (
    record_id        text PRIMARY KEY,
    event_id         text        NOT NULL,
    namespace        text        NOT NULL,
    reason           text        NOT NULL,
    producer         text        NOT NULL,
    source_topic     text        NOT NULL,
    source_partition integer     NOT NULL,
    source_offset    bigint      NOT NULL,
    refused_at       timestamptz NOT NULL DEFAULT now(),
    announced_at     timestamptz
);
CREATE INDEX refused_writes_namespace ON refused_writes (namespace, refused_at);
