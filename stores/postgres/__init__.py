"""Postgres's own tools: the pool and its codecs, rows of the records table, every store opened
on one pool, the migrations and their runner, and the local server of `make run`."""
