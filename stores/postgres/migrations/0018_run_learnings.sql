-- memstream schema, version 18: run learnings. Each run.finished reads the digests of its
-- task key, and the review queue lists the draft lessons and patterns runs proposed, each
-- from an index instead of reading every record of the namespace.
CREATE INDEX records_digests_by_task ON records (namespace, (body ->> 'task_key'))
    WHERE record_kind = 'run_digest';
CREATE INDEX records_proposed_learnings ON records (namespace, stored_at)
    WHERE review_state = 'draft' AND trust_class = 'derived'
      AND memory_type IN ('lesson', 'pattern') AND NOT body ? 'merged_from';
