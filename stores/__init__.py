"""I/O adapters: the stores by aggregate (each a Protocol and its Postgres implementation) and
the migrations, the vector index, the local servers."""
