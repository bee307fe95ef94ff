"""I/O adapters: one module per aggregate (a Protocol and its Postgres implementation),
recall's bookkeeping in `recall/`, the retrieval index in `index/`, Postgres's own tools
(the pool, codecs, migrations, the local server) in `postgres/`."""
