"""How memory is read back: ranking hybrid hits, confidence, adaptive scores and their
config, ratings, the context pack, summaries, gaps, and a record as of a moment."""
