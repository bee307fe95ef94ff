-- memstream schema, version 2: what fix patterns are rebuilt from.

-- One row per run: what it tried (task_key, repo) and how it ended. Kept from run.started
-- and run.finished so that "the next succeeding run of the same task" is one index lookup.
CREATE TABLE runs (
    namespace   text NOT NULL,
    run_id      text NOT NULL,
    task_key    text,
    repo        text,
    started_at  timestamptz,
    status      text,
    finished_at timestamptz,
    PRIMARY KEY (namespace, run_id)
);
CREATE INDEX runs_succeeded_by_task ON runs (namespace, task_key, finished_at)
    WHERE status = 'succeeded';
CREATE INDEX runs_succeeded_by_repo ON runs (namespace, repo, finished_at)
    WHERE status = 'succeeded';

INSERT INTO runs (namespace, run_id, task_key, repo, started_at, status, finished_at)
SELECT namespace, run_id,
       (array_agg(payload->>'task_key' ORDER BY occurred_at) FILTER (WHERE type = 'run.started'))[1],
       (array_agg(payload->>'repo' ORDER BY occurred_at) FILTER (WHERE type = 'run.started'))[1],
       min(occurred_at) FILTER (WHERE type = 'run.started'),
       (array_agg(payload->>'status' ORDER BY occurred_at DESC)
            FILTER (WHERE type = 'run.finished'))[1],
       max(occurred_at) FILTER (WHERE type = 'run.finished')
FROM run_events GROUP BY namespace, run_id;

-- Every error met: a run.step of kind error or a failed run's error, with its signature.
-- event_id makes a replay a no-op.
CREATE TABLE error_occurrences (
    event_id       text PRIMARY KEY,
    namespace      text        NOT NULL,
    run_id         text        NOT NULL,
    signature_id   text        NOT NULL,
    origin         text        NOT NULL,
    occurred_at    timestamptz NOT NULL,
    dialect        text        NOT NULL,
    exception_type text,
    template       text        NOT NULL,
    frames         text[]      NOT NULL,
    message        text        NOT NULL,
    provenance     jsonb       NOT NULL
);
CREATE INDEX error_occurrences_signature ON error_occurrences (namespace, signature_id);
CREATE INDEX error_occurrences_run ON error_occurrences (namespace, run_id);

-- A run's digest, found from the run: fix patterns show what their fixing runs changed.
CREATE INDEX records_digest_of_run ON records (namespace, run_ref) WHERE record_kind = 'run_digest';
