"""What runs teach: digests, error signatures (stack traces, masked messages), fix
patterns backed by evidence runs, and the learnings proposed from them."""
