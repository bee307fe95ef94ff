-- memstream schema, version 13: the review queue (GET /v1/review-queue) lists a namespace's
-- draft merges from an index instead of reading every live memory of the namespace.
CREATE INDEX records_draft_merges ON records (namespace, stored_at)
    WHERE review_state = 'draft' AND body ? 'merged_from';
