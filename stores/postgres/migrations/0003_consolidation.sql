-- memstream schema, version 3: consolidation and its maintenance reports.

-- When a record reached Postgres: "new memories since the last report" counts arrivals, not
-- the occurred_at an event claims. Records stored before this migration get its time.
ALTER TABLE records ADD COLUMN stored_at timestamptz NOT NULL DEFAULT now();
CREATE INDEX records_live_memories ON records (namespace, stored_at)
    WHERE record_kind = 'memory' AND superseded_by IS NULL;
-- A replacement lists what it superseded; the members point back to it.
CREATE INDEX records_superseded_by ON records (superseded_by) WHERE superseded_by IS NOT NULL;

-- One row per consolidation that ran; report_id is the memory.consolidate request's
-- event_id, so a re-delivered request finds its report and changes nothing.
CREATE TABLE maintenance_reports (
    report_id    text PRIMARY KEY,
    namespace    text        NOT NULL,
    reason       text        NOT NULL,
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz NOT NULL DEFAULT now(),
    memories     integer     NOT NULL,
    clusters     jsonb       NOT NULL,
    merged_ids   text[]      NOT NULL,
    new_ids      text[]      NOT NULL,
    timings      jsonb       NOT NULL,
    -- Set once the index holds the replacements and memory.updated announced them.
    announced_at timestamptz
);
CREATE INDEX maintenance_reports_namespace ON maintenance_reports (namespace, finished_at DESC);

-- New memories per namespace and tumbling window (MEMSTREAM_COUNT_WINDOW_S), counted in the
-- transaction that stores them, so a replayed write is never counted twice.
CREATE TABLE memory_window_counts (
    namespace    text        NOT NULL,
    window_start timestamptz NOT NULL,
    memories     integer     NOT NULL,
    PRIMARY KEY (namespace, window_start)
);

-- The counted consolidation requests: one per namespace and basis (its day, or the report it
-- follows). sent_at stays empty until the broker has the request, so an unsent one is sent
-- again by the next batch of the namespace.
CREATE TABLE consolidation_requests (
    namespace    text        NOT NULL,
    basis        text        NOT NULL,
    request_id   text        NOT NULL,
    new_memories integer     NOT NULL,
    claimed_at   timestamptz NOT NULL DEFAULT now(),
    sent_at      timestamptz,
    PRIMARY KEY (namespace, basis)
);
