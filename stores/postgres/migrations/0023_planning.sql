-- memstream schema, version 23: a repository's planning (Beads work items, docs/planning.md).
-- planning_items: each item as last read from the repository's issues.jsonl, its fields as
-- bd wrote them; a read whose content is unchanged leaves the row as it is.
CREATE TABLE planning_items (
    namespace    text        NOT NULL,
    repo         text        NOT NULL,
    item_id      text        NOT NULL,
    fields       jsonb       NOT NULL,
    content_hash text        NOT NULL,
    read_at      timestamptz NOT NULL,
    event_id     text        NOT NULL,
    PRIMARY KEY (namespace, repo, item_id)
);
-- planning_writebacks: what runs did to the items (claimed, closed or released, follow-ups
-- found), once by event id, in the order applied (seq); a sync writes the pending ones into
-- the repository's file and marks them applied, or failed with why (an item the file lost).
CREATE TABLE planning_writebacks (
    seq         bigserial   NOT NULL,
    event_id    text        PRIMARY KEY,
    namespace   text        NOT NULL,
    repo        text        NOT NULL,
    item_id     text        NOT NULL,
    type        text        NOT NULL,
    occurred_at timestamptz NOT NULL,
    payload     jsonb       NOT NULL,
    state       text        NOT NULL DEFAULT 'pending'
                            CHECK (state IN ('pending', 'applied', 'failed')),
    settled_at  timestamptz,
    detail      text
);
CREATE INDEX planning_writebacks_pending ON planning_writebacks (namespace, repo, seq)
    WHERE state = 'pending';
