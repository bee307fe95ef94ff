-- memstream schema, version 17: what agents make of their memories (seed 003; docs/events.md
-- memory.rate, docs/retrieval.md). Ratings, the gaps agents name, and per (agent, memory)
-- the inputs of the adaptive score. The score itself is computed at read time from these
-- inputs (processors/adaptive_scoring.py): a stored score would go stale as time passes.

-- Every rating of every memory, once by (event, memory): a replayed memory.rate adds nothing.
CREATE TABLE memory_valuations (
    event_id   text        NOT NULL,
    memory_id  text        NOT NULL,
    namespace  text        NOT NULL,
    agent_id   text        NOT NULL,
    useful     boolean     NOT NULL,
    -- When the agent rated it (the event's occurred_at): what the rehabilitation of a
    -- negative rating decays from.
    valued_at  timestamptz NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (event_id, memory_id)
);
CREATE INDEX memory_valuations_by_memory ON memory_valuations (namespace, memory_id, agent_id,
                                                                valued_at DESC);

-- What agents needed and memory did not hold: one row per (agent, source, the gap's
-- normalised text), counted each time it is met again.
CREATE TABLE memory_gaps (
    id            bigserial   PRIMARY KEY,
    namespace     text        NOT NULL,
    agent_id      text        NOT NULL,
    -- explicit: named in a rating.
    source        text        NOT NULL CHECK (source IN ('explicit')),
    gap_key       text        NOT NULL,
    gap           text        NOT NULL,
    query         text,
    first_seen    timestamptz NOT NULL,
    last_seen     timestamptz NOT NULL,
    times         integer     NOT NULL CHECK (times >= 1),
    last_event_id text        NOT NULL,
    UNIQUE (namespace, agent_id, source, gap_key)
);
CREATE INDEX memory_gaps_recent ON memory_gaps (namespace, last_seen DESC);

-- The inputs of the adaptive score of a memory for an agent, changed in the transaction
-- that stores a rating (memory_valuations) or a batch of the retrieval log (its rows with
-- an agent).
CREATE TABLE memory_scores (
    namespace         text        NOT NULL,
    agent_id          text        NOT NULL,
    memory_id         text        NOT NULL,
    valuation_count   integer     NOT NULL DEFAULT 0 CHECK (valuation_count >= 0),
    useful_count      integer     NOT NULL DEFAULT 0
                      CHECK (useful_count BETWEEN 0 AND valuation_count),
    last_valuation_at timestamptz,
    access_count      bigint      NOT NULL DEFAULT 0 CHECK (access_count >= 0),
    last_access_at    timestamptz,
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, agent_id, memory_id)
);
CREATE INDEX memory_scores_by_memory ON memory_scores (namespace, memory_id);
