"""Timers that read what records know, off the write path: the entity index, the LLM hook's
entities, and the stale facts newer memories make."""
