-- memstream schema, version 24: knowledge over time (docs/lifecycle.md#facts-that-go-stale,
-- docs/knowledge.md).
-- A memory that a newer one restates with another value is invalidated: when its fact
-- stopped holding (valid_until, the newer's occurred_at) and the memory that says so. It
-- leaves the index, as a merged or expired record does, and stays in history.
ALTER TABLE records ADD COLUMN valid_until timestamptz;
ALTER TABLE records ADD COLUMN invalidated_by text;
-- When a memory was compared with its neighbours for the facts it makes stale
-- (streams/stages/stale_facts.py, off the write path); NULL: not yet. The memories stored
-- before this migration are not compared: invalidation begins with the writes after it.
ALTER TABLE records ADD COLUMN stale_checked_at timestamptz;
UPDATE records SET stale_checked_at = now() WHERE record_kind = 'memory';
CREATE INDEX records_stale_unchecked ON records (stored_at)
    WHERE record_kind = 'memory' AND stale_checked_at IS NULL;
-- How sure memory is of a record (seed 001), kept by the stores that change its inputs
-- (trust class, review state, restatements, agents' ratings: processors/confidence.py).
ALTER TABLE records ADD COLUMN confidence double precision;

-- The records that left the index (merged, expired, invalidated), by when they left (their
-- last change): what a search as of an earlier moment reads beside the index.
CREATE INDEX records_departed ON records (namespace, updated_at)
    WHERE superseded_by IS NOT NULL OR expired_at IS NOT NULL OR invalidated_by IS NOT NULL;
-- The version of a record whose entities are indexed (stores/entities.py): the entity index
-- catches up with the records off the write path, oldest first.
ALTER TABLE records ADD COLUMN entities_version integer;
CREATE INDEX records_entities_due ON records (stored_at)
    WHERE entities_version IS DISTINCT FROM version
      AND superseded_by IS NULL AND expired_at IS NULL AND invalidated_by IS NULL;
-- The version of a record at a moment: its versions in the order they were made.
CREATE INDEX record_versions_at ON record_versions (record_id, changed_at);
-- The records that name a record among their related ids: a graph walk follows them back.
CREATE INDEX records_related_ids ON records USING gin (related_ids);

-- The names records mention, normalised (processors/entities.py), per namespace.
CREATE TABLE entities (
    namespace  text        NOT NULL,
    entity_key text        NOT NULL,
    name       text        NOT NULL,
    kind       text        NOT NULL,
    -- The forms it was written in.
    aliases    text[]      NOT NULL DEFAULT '{}',
    first_seen timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, entity_key)
);

-- Which record mentions which entity, and how (a wiki-link, a tag, a proper noun ...; and
-- `title`: the entity its title names, which wiki-links to it resolve to), as read from the
-- record's version `version`; `origin` says whether the rules found it or the LLM hook
-- added it. A record read again replaces its rows of that origin.
CREATE TABLE entity_mentions (
    namespace  text    NOT NULL,
    entity_key text    NOT NULL,
    record_id  text    NOT NULL REFERENCES records (record_id),
    source     text    NOT NULL,
    origin     text    NOT NULL CHECK (origin IN ('rules', 'llm')),
    version    integer NOT NULL,
    PRIMARY KEY (namespace, entity_key, record_id, origin, source)
);
CREATE INDEX entity_mentions_by_record ON entity_mentions (record_id);

-- Relations stated in a record ("X uses Y", a wiki-link from a typed page): one row per
-- (relation, evidence record). Co-mentions are read from entity_mentions, not kept here.
CREATE TABLE entity_relations (
    namespace  text NOT NULL,
    source_key text NOT NULL,
    target_key text NOT NULL,
    relation   text NOT NULL,
    record_id  text NOT NULL REFERENCES records (record_id),
    origin     text NOT NULL CHECK (origin IN ('pattern', 'wiki_link', 'llm')),
    evidence   text NOT NULL,
    confidence real NOT NULL CHECK (confidence > 0 AND confidence <= 1),
    PRIMARY KEY (namespace, source_key, target_key, relation, record_id)
);
CREATE INDEX entity_relations_by_record ON entity_relations (record_id);
CREATE INDEX entity_relations_by_target ON entity_relations (namespace, target_key);

-- The versions of records the LLM hook was asked about (when one is configured), once each:
-- what it named is in entity_mentions with origin 'llm'.
CREATE TABLE entity_llm_reads (
    record_id text        NOT NULL REFERENCES records (record_id),
    version   integer     NOT NULL,
    named     integer     NOT NULL,
    read_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (record_id, version)
);
