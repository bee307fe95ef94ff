-- memstream schema, version 5: hybrid retrieval, threads, search budgets, the retrieval log.

-- The conversation, session or document a memory is one part of, in order: the memory
-- before it in its thread is its context at retrieval.
ALTER TABLE records ADD COLUMN thread text;
CREATE INDEX records_thread ON records (namespace, thread, stored_at DESC)
    WHERE thread IS NOT NULL;

-- The record's lexical vector (BM25 term weights, processors/lexical.py) and its term ids:
-- what the Postgres fallback searches and counts, as the index does.
ALTER TABLE records ADD COLUMN lexical sparsevec;
ALTER TABLE records ADD COLUMN lexical_terms integer[];
CREATE INDEX records_lexical_terms ON records USING gin (lexical_terms);

-- Searches made for a run (MEMSTREAM_MAX_SEARCHES_PER_RUN), shared by every worker.
CREATE TABLE run_search_budgets (
    namespace  text        NOT NULL,
    run_id     text        NOT NULL,
    searches   integer     NOT NULL,
    first_at   timestamptz NOT NULL DEFAULT now(),
    last_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, run_id)
);

-- Every record that search or context surfaced, for the scoring that learns from use.
CREATE TABLE memory_retrieval_log (
    id           bigserial   PRIMARY KEY,
    namespace    text        NOT NULL,
    record_id    text        NOT NULL,
    agent_id     text,
    run_id       text,
    query_hash   text        NOT NULL,
    route        text        NOT NULL,
    rank         integer     NOT NULL,
    retrieved_at timestamptz NOT NULL
);
CREATE INDEX memory_retrieval_log_record ON memory_retrieval_log (namespace, record_id,
                                                                  retrieved_at);
