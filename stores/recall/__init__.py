"""Recall's bookkeeping: what reads surfaced (the retrieval log), ratings and the adaptive
scores they make, the scoring config's versions, and the gaps agents met."""
