"""The planning plane: Beads' issues.jsonl as read and written back, readiness, and what
runs ask of their work items."""
