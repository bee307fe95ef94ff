"""Text as memory reads it: lexical terms and BM25 vectors, condensing, what of a record is
embedded (with the embedding's type), and what each embedding model's cosines mean (every
threshold that reads one). Secrets redaction is the client's (`memstream_client.redaction`):
the CLI hashes a document's text redacted, as the worker does."""
