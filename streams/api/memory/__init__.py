"""The views of memory's records: writes (published as events), records and their history,
core blocks, the review queue, the change feed, sessions, ratings and scoring, documents."""
