"""Consolidation: the candidates and settings, when two memories say the same thing
(restatements), clusters of duplicates and their merge, the plan of a run, and its trigger."""
