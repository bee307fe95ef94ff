"""`memstream`: the command line over the HTTP API (search, context, records, reviews, keys,
a tail of the changes), tables for people and `--json` for scripts."""

from memstream_client.cli.commands import main

__all__ = ["main"]
