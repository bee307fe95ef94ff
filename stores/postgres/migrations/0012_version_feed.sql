-- memstream schema, version 12: record versions carry their namespace, so that a
-- namespace's feed of changes (GET /v1/changes) reads the versions after its cursor from an
-- index instead of every version of the namespace's records.
ALTER TABLE record_versions ADD COLUMN namespace text;
UPDATE record_versions v SET namespace = r.namespace FROM records r
    WHERE r.record_id = v.record_id;
ALTER TABLE record_versions ALTER COLUMN namespace SET NOT NULL;
CREATE INDEX record_versions_feed ON record_versions (namespace, changed_at, record_id, version);
