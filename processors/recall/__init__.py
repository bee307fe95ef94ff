"""How memory is read back: ranking hybrid hits, confidence, adaptive scores and their
config, ratings, the context pack, summaries, gaps, a record as of a moment, and how a
memory contested by a correction awaiting review is shown."""
