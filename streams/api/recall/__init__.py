"""The views that ask memory: search, the context pack, the summary, fix patterns, the graph
and entities, and the gaps; each parses its parameters, calls the read core and renders."""
