"""The stages of runs.events and planning.events: run digests and fix patterns, their
refresh, run learnings, what runs ask of their planning items, and the planning ledger."""
