-- memstream schema, version 26: how fully a record holds each of its terms
-- (processors/lexical.py, term_presence: 1 for a term of its title, text or date, its
-- context's weight for a term only a context holds), kept with it by the stores that write
-- its text, so that a search reads it instead of tokenizing every candidate again. NULL: a
-- record stored before this migration; search computes those from the texts, as before.
ALTER TABLE records ADD COLUMN term_presence sparsevec;
