-- memstream schema, version 9: core memory blocks (seed 004), each edit a version; what a
-- rotation archives becomes a memory record (archived_record_id).
CREATE TABLE core_blocks (
    namespace  text        NOT NULL,
    agent_id   text        NOT NULL,
    label      text        NOT NULL,
    -- Field name -> a text or a list of items, in the order first set.
    fields     jsonb       NOT NULL,
    version    integer     NOT NULL,
    strategy   text        NOT NULL,
    threshold  real        NOT NULL,
    rotations  boolean[]   NOT NULL DEFAULT '{}',
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, agent_id, label)
);

CREATE TABLE core_block_versions (
    namespace          text        NOT NULL,
    agent_id           text        NOT NULL,
    label              text        NOT NULL,
    version            integer     NOT NULL,
    fields             jsonb       NOT NULL,
    text               text        NOT NULL,
    -- The edit that made it: a replay finds its event id here and changes nothing.
    event_id           text        NOT NULL UNIQUE,
    actor              text        NOT NULL,
    changed            text[]      NOT NULL,
    usage              real        NOT NULL,
    archived_record_id text,
    changed_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, agent_id, label, version)
);
