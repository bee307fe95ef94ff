"""I/O adapters: the Postgres repository and migrations, the vector index, the local servers."""
