-- memstream schema, version 30: the similarity model's vectors (embedder.models.SIMILARITY_MODEL),
-- which judge whether two texts say the same thing (twins, consolidation; stores/similarity_vectors.py).
-- Kept by the text's digest, not by record: a record's new version is a new text, and two
-- records of one text share a vector. Computed when a rule first needs one.
CREATE TABLE similarity_vectors (
    model       text        NOT NULL,
    text_sha256 bytea       NOT NULL,
    embedding   vector      NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (model, text_sha256)
);
-- Gap questions are now grouped by the similarity model's vectors: a store that embedded
-- them with another model groups its questions again, from the start.
UPDATE memory_gap_groups SET embedding = NULL, merged_into = NULL
WHERE EXISTS (SELECT 1 FROM embedding_model WHERE model <> 'all-MiniLM-L6-v2');
