-- memstream schema, version 21: seed 002's keys on every record: the repository it belongs
-- to (NULL: the whole namespace's) and who may be shown it (security_scope). Digests take
-- their run's repo.
ALTER TABLE records ADD COLUMN repo text;
ALTER TABLE records ADD COLUMN security_scope text;

UPDATE records SET repo = NULLIF(body->>'repo', '')
WHERE record_kind = 'run_digest' AND body->>'repo' IS NOT NULL;
