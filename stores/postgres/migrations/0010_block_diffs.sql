-- memstream schema, version 10: pending diffs of core memory blocks (MEMSTREAM_PROTECT=
-- core_blocks): an edit proposed to a block waits here for a memory.review.
CREATE TABLE core_block_diffs (
    diff_id           text PRIMARY KEY,
    namespace         text        NOT NULL,
    agent_id          text        NOT NULL,
    label             text        NOT NULL,
    base_version      integer     NOT NULL,
    -- The memory.block payload as proposed.
    payload           jsonb       NOT NULL,
    proposer          text        NOT NULL,
    proposed_at       timestamptz NOT NULL,
    state             text        NOT NULL DEFAULT 'pending',
    decided_by        text,
    decided_at        timestamptz,
    decision_event_id text UNIQUE
);
CREATE INDEX core_block_diffs_open ON core_block_diffs (namespace, proposed_at)
    WHERE state = 'pending';
