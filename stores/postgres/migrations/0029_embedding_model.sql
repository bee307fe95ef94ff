-- memstream schema, version 29: the embedding model whose vectors the store holds
-- (embedder/models.py; stores/embedding_model.py). One model per store: a worker of another
-- model refuses to start rather than mix vectors that no cosine can compare, and
-- `python -m stores.index.reindex --model NAME` re-embeds everything into a new model,
-- resumably: `reembedding_to` is the model it moves to, `reembedded_through` the last record
-- id done (record ids in order), then the gap groups' questions.
CREATE TABLE embedding_model (
    only_row           boolean     PRIMARY KEY DEFAULT true CHECK (only_row),
    model              text        NOT NULL,
    reembedding_to     text,
    reembedded_through text,
    changed_at         timestamptz NOT NULL DEFAULT now()
);
-- Every store written before models were configurable holds all-MiniLM-L6-v2's vectors.
INSERT INTO embedding_model (model)
SELECT 'all-MiniLM-L6-v2'
WHERE EXISTS (SELECT 1 FROM records WHERE embedding IS NOT NULL)
   OR EXISTS (SELECT 1 FROM memory_gap_groups WHERE embedding IS NOT NULL);
