"""Text as memory reads it: lexical terms and BM25 vectors, condensing, and what of a record is
embedded (with the embedding's type). Secrets redaction is the client's
(`memstream_client.redaction`): the CLI hashes a document's text redacted, as the worker does."""
