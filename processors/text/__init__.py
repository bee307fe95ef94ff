"""Text as memory reads it: lexical terms and BM25 vectors, condensing, secrets redacted,
and what of a record is embedded (with the embedding's type)."""
