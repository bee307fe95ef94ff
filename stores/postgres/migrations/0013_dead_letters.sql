-- memstream schema, version 13: dead letters, readable (processors/dead_letters.py).

-- One row per event dead-lettered, read back from the dead-letter topics, named by where the
-- event was read (or, if its headers do not say, by its place in the dead-letter topic), so
-- that consuming a dead-letter topic again adds nothing. Of the value only the first bytes
-- are kept, redacted; the whole stays on the topic for as long as it retains it.
CREATE TABLE dead_letters (
    dead_letter_id   text PRIMARY KEY,
    dlq_topic        text        NOT NULL,
    dlq_partition    integer     NOT NULL,
    dlq_offset       bigint      NOT NULL,
    dead_lettered_at timestamptz NOT NULL,
    source_topic     text,
    source_partition integer,
    source_offset    bigint,
    namespace        text,
    message_key      text,
    reason           text        NOT NULL,
    error            text        NOT NULL,
    head             text        NOT NULL,
    head_utf8        boolean     NOT NULL,
    size_bytes       integer     NOT NULL,
    truncated        boolean     NOT NULL,
    recorded_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dead_letters_newest ON dead_letters (dead_lettered_at DESC, dead_letter_id DESC);
CREATE INDEX dead_letters_namespace
    ON dead_letters (namespace, dead_lettered_at DESC, dead_letter_id DESC);
