"""What memories know together: the entities they name and their relations, the graph
of links and shared entities and its walk, and the facts a newer memory makes stale."""
