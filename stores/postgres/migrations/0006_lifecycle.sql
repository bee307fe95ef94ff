-- memstream schema, version 6: memories that are kept: updated, deprecated, reviewed,
-- restored, every change a version; pending diffs for protected records.

-- What each version is: the change that made it, who made it, the fields beside text and
-- body as they were (so that any version can be shown, compared and restored), which of
-- them the change touched, and why.
ALTER TABLE record_versions ADD COLUMN change text NOT NULL DEFAULT 'created';
ALTER TABLE record_versions ADD COLUMN actor text;
ALTER TABLE record_versions ADD COLUMN fields jsonb NOT NULL DEFAULT '{}'::jsonb;
ALTER TABLE record_versions ADD COLUMN changed text[] NOT NULL DEFAULT '{}';
ALTER TABLE record_versions ADD COLUMN reason text;
UPDATE record_versions v SET fields = jsonb_build_object(
        'title', r.title, 'memory_type', r.memory_type, 'tags', to_jsonb(r.tags),
        'related_ids', to_jsonb(r.related_ids), 'review_state', r.review_state, 'tier', r.tier)
    FROM records r WHERE r.record_id = v.record_id;

-- Every lifecycle event applied, by event id: a replay finds it here and changes nothing.
-- announced_at is set once memory.updated has the change.
CREATE TABLE lifecycle_events (
    event_id     text PRIMARY KEY,
    namespace    text        NOT NULL,
    record_id    text        NOT NULL REFERENCES records (record_id),
    type         text        NOT NULL,
    -- What it did: a ChangeKind, or 'unchanged' when it changed nothing.
    outcome      text        NOT NULL,
    -- The record's version after it.
    version      integer     NOT NULL,
    applied_at   timestamptz NOT NULL DEFAULT now(),
    announced_at timestamptz
);
CREATE INDEX lifecycle_events_record ON lifecycle_events (record_id, applied_at);

-- Changes proposed to a protected record, waiting for a memory.review. diff_id is the
-- proposing update's event id; a newer proposal for the record supersedes the older one.
CREATE TABLE pending_diffs (
    diff_id           text PRIMARY KEY,
    namespace         text        NOT NULL,
    record_id         text        NOT NULL REFERENCES records (record_id),
    base_version      integer     NOT NULL,
    -- The fields the update would set, as it gave them.
    proposed          jsonb       NOT NULL,
    proposer          text        NOT NULL,
    proposed_at       timestamptz NOT NULL,
    state             text        NOT NULL DEFAULT 'pending',
    decided_by        text,
    decided_at        timestamptz,
    decision_event_id text
);
CREATE INDEX pending_diffs_open ON pending_diffs (namespace, proposed_at)
    WHERE state = 'pending';
CREATE INDEX pending_diffs_record ON pending_diffs (record_id) WHERE state = 'pending';
