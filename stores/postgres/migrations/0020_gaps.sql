-- memstream schema, version 20: gaps met by recalls that found nothing (implicit) beside
-- those agents name (explicit), grouped by question, and resolved by a later memory
-- (processors/gaps.py, streams/api/gap_keeper.py; docs/retrieval.md#gaps).

-- A group of gaps that ask the same question. Rows join the group of their content terms at
-- write (terms_key); the keeper then embeds the group's first question and folds the group
-- into the nearest older one at or above the grouping threshold (merged_into: always a
-- group that was folded into none). The question is the keeper's to embed, never shown:
-- it may be any agent's.
CREATE TABLE memory_gap_groups (
    id          bigserial   PRIMARY KEY,
    namespace   text        NOT NULL,
    terms_key   text        NOT NULL,
    question    text        NOT NULL,
    embedding   vector(384),
    merged_into bigint      REFERENCES memory_gap_groups (id),
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (namespace, terms_key)
);
CREATE INDEX memory_gap_groups_unplaced ON memory_gap_groups (id) WHERE embedding IS NULL;

-- A recall made with a key bound to no agent meets a gap of no agent: one row for all of
-- them (NULLS NOT DISTINCT), never one per sighting.
ALTER TABLE memory_gaps ALTER COLUMN agent_id DROP NOT NULL;
ALTER TABLE memory_gaps DROP CONSTRAINT memory_gaps_namespace_agent_id_source_gap_key_key;
ALTER TABLE memory_gaps ADD CONSTRAINT memory_gaps_one_row
    UNIQUE NULLS NOT DISTINCT (namespace, agent_id, source, gap_key);
-- implicit: a recall (search, context, summary, wake) that showed nothing; it has no event.
ALTER TABLE memory_gaps DROP CONSTRAINT memory_gaps_source_check;
ALTER TABLE memory_gaps ADD CONSTRAINT memory_gaps_source_check
    CHECK (source IN ('explicit', 'implicit'));
ALTER TABLE memory_gaps ALTER COLUMN last_event_id DROP NOT NULL;
ALTER TABLE memory_gaps ADD COLUMN group_id bigint REFERENCES memory_gap_groups (id);
-- The memory that answered the gap's question for its agent, at what relevance, when; all
-- three null while it is open. A gap met again after it was resolved is open again.
ALTER TABLE memory_gaps ADD COLUMN resolved_at timestamptz;
ALTER TABLE memory_gaps ADD COLUMN resolved_by text;
ALTER TABLE memory_gaps ADD COLUMN resolved_score real;
-- When a keeper last asked the question again (the time it claimed the gap), and until when
-- one is asking it now: a keeper that dies mid-check leaves the gap to the next when the
-- claim runs out.
ALTER TABLE memory_gaps ADD COLUMN checked_at timestamptz;
ALTER TABLE memory_gaps ADD COLUMN checking_until timestamptz;

-- The gaps named before this version: a group each, keyed by their row (their content terms
-- are the stemmer's, which SQL does not have); the keeper folds them as any new group.
INSERT INTO memory_gap_groups (namespace, terms_key, question)
SELECT namespace, 'row:' || id, gap FROM memory_gaps;
UPDATE memory_gaps SET group_id = groups.id
FROM memory_gap_groups AS groups
WHERE groups.namespace = memory_gaps.namespace AND groups.terms_key = 'row:' || memory_gaps.id;
ALTER TABLE memory_gaps ALTER COLUMN group_id SET NOT NULL;

CREATE INDEX memory_gaps_by_group ON memory_gaps (group_id);
CREATE INDEX memory_gaps_open ON memory_gaps (namespace, last_seen) WHERE resolved_at IS NULL;
-- Whether a namespace announced anything since a gap was last asked again: the newest
-- announcement of a namespace, read from the index's end.
CREATE INDEX records_announced ON records (namespace, announced_at);
