-- memstream schema, version 16: the session ledger (docs/sessions.md). Every event of every
-- agent session, appended once by its event id, in the order the stage applied them (seq),
-- which is the order its rules judged them in.
CREATE TABLE session_events (
    seq              bigserial   NOT NULL,
    event_id         text        PRIMARY KEY,
    namespace        text        NOT NULL,
    session_id       text        NOT NULL,
    agent_id         text        NOT NULL,
    type             text        NOT NULL,
    occurred_at      timestamptz NOT NULL,
    producer         text        NOT NULL,
    payload          jsonb       NOT NULL,
    source_topic     text        NOT NULL,
    source_partition integer     NOT NULL,
    source_offset    bigint      NOT NULL
);
CREATE INDEX session_events_by_session ON session_events (namespace, session_id, seq);
-- An agent's last sleep: the handoff its next wake returns.
CREATE INDEX session_events_slept ON session_events (namespace, agent_id, seq DESC)
    WHERE type = 'session.slept';
