"""Memory for agent frameworks, over the SDK (`sdk`): the pydantic-ai toolset of seeds
000 and 001, its run's counters and its reminder (`agents/pydantic_ai.py`,
docs/agents.md). Only this package imports pydantic-ai (an import contract)."""
