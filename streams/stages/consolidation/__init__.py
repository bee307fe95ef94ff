"""Consolidation as stages: the requests the windowed counts trigger, the consolidator that
clusters and merges, and the relay that indexes and announces what it wrote."""
