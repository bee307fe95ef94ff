-- memstream schema, version 4: what intake cleaned, and consolidations published by the
-- worker that owns the index.

-- Characters intake removed (U+0000) or replaced (lone surrogates) per prose field.
ALTER TABLE run_events ADD COLUMN sanitized jsonb NOT NULL DEFAULT '{}'::jsonb;

-- The consolidator process writes a report in Postgres; a worker that owns the index then
-- indexes and announces it. lease_until keeps two workers from publishing it at once;
-- publish_started_at tells a later try from when announcements may already exist.
ALTER TABLE maintenance_reports ADD COLUMN publish_started_at timestamptz;
ALTER TABLE maintenance_reports ADD COLUMN lease_until timestamptz;
CREATE INDEX maintenance_reports_unannounced ON maintenance_reports (finished_at)
    WHERE announced_at IS NULL;
