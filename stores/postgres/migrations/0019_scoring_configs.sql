-- memstream schema, version 19: the adaptive scoring's parameters per namespace (seed 003's
-- table, processors/adaptive_scoring.ScoringConfig), versioned: every change is a row, the
-- namespace's config is its newest. A namespace with no row scores with the defaults.
CREATE TABLE scoring_config_versions (
    namespace  text        NOT NULL,
    version    integer     NOT NULL CHECK (version >= 1),
    -- Every parameter as it stood after the change.
    config     jsonb       NOT NULL,
    -- Only what this change set (parameter name -> new value).
    changes    jsonb       NOT NULL,
    changed_by text        NOT NULL,
    changed_at timestamptz NOT NULL,
    -- The event that made the change: a replay of it adds nothing.
    event_id   text        NOT NULL UNIQUE,
    PRIMARY KEY (namespace, version)
);
