"""Memory for agent frameworks, over the SDK (client/sdk): the pydantic-ai toolset of seeds
000 and 001, its run's counters and its reminder (client/agents/pydantic_ai.py,
docs/agents.md). Only this package imports pydantic-ai (an import contract)."""
