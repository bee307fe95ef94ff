"""The read core: a read done typed in, typed out, for the HTTP face and the timers alike:
search, the context pack, the summary, fix patterns, the graph walk, planning reads, and the
two read timers (the retrieval log, the gap keeper). Knows no web framework; stands on the
plumbing alone."""
