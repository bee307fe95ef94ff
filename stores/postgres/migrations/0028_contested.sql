-- memstream schema, version 28: a record's invalidation diffs, whatever their state, found by
-- the record. A search as of a moment reads with each candidate the invalidation that was
-- waiting for a reviewer then (stores/records.py, CONTEST_THEN): proposed by then, decided
-- or superseded after. The partial index of migration 0006 holds the pending diffs only, so
-- without this one each candidate of such a search would scan every diff ever proposed.
CREATE INDEX pending_diffs_invalidations ON pending_diffs (record_id)
    WHERE proposed ? 'invalidated_by';
