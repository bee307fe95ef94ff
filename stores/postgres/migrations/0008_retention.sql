-- memstream schema, version 8: retention. A record past its expires_at, or older than its
-- kind's retention (MEMSTREAM_RETENTION), is taken out of the index and announced `expired`;
-- Postgres keeps it, marked, for history.
ALTER TABLE records ADD COLUMN expired_at timestamptz;
CREATE INDEX records_expiring ON records (expires_at)
    WHERE expired_at IS NULL AND superseded_by IS NULL AND expires_at IS NOT NULL;
CREATE INDEX records_kind_age ON records (record_kind, updated_at)
    WHERE expired_at IS NULL AND superseded_by IS NULL;
CREATE INDEX records_expired_unannounced ON records (expired_at)
    WHERE expired_at IS NOT NULL AND announced_at IS NULL;
