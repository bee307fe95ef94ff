"""The stages of memory.events, sessions.events and documents.events: writes (with twins),
lifecycle changes, core blocks, ratings, the scoring config, sessions and documents."""
