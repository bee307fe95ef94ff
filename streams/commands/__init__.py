"""Operators' commands, each `python -m streams.commands.<name>`: keys, topics,
consolidate, replay_dead_letters, reembed. They may import any room of streams/; no room
imports them."""
