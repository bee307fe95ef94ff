"""The retrieval index: its Protocol and the search scope every backend translates, the three
backends (embedded Qdrant, a Qdrant server, pgvector), the factory that picks one by URL, the
payload of a point, the same search over Postgres when the index fails, and reindex."""
