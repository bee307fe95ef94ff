"""A pydantic-ai agent with memory, driven by a script instead of an LLM (`FunctionModel`):
each turn of the script is the tool calls the model makes, or its final answer. The tests of
memstream_client/agents share it, unit and integration."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from memstream_client.agents.pydantic_ai import MemoryRun, memory_reminder, memory_toolset

# A turn: the tools called (name, arguments), or the final answer.
Turn = list[tuple[str, dict[str, Any]]] | str


@dataclass
class Script:
    turns: list[Turn]
    # What the model was sent before each turn: the prompt, tool results, retries.
    seen: list[list[Any]] = field(default_factory=list)
    # What happens in the world while the model thinks, by the turn it comes before (what
    # another process does meanwhile, such as a worker catching up).
    meanwhile: dict[int, Callable[[], None]] = field(default_factory=dict)

    def respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        self.seen.append(list(last.parts))
        happening = self.meanwhile.get(len(self.seen) - 1)
        if happening is not None:
            happening()
        turn = self.turns.pop(0)
        if isinstance(turn, str):
            return ModelResponse(parts=[TextPart(turn)])
        return ModelResponse(parts=[ToolCallPart(name, args) for name, args in turn])

    def tool_results(self, turn: int) -> list[Any]:
        """What the tools answered before the model's `turn`."""
        return [part.content for part in self.seen[turn]
                if isinstance(part, ToolReturnPart) and part.outcome != "retried"]

    def retries(self) -> list[str]:
        """The feedback the model was sent back with, in order: a tool's call to fix, and
        its output refused (sent as a user prompt)."""
        return [str(part.content) for parts in self.seen[1:] for part in parts
                if (isinstance(part, ToolReturnPart) and part.outcome == "retried")
                or isinstance(part, UserPromptPart)]


def memory_agent(script: Script) -> Agent[MemoryRun, str]:
    """An agent with the memory toolset and the reminder, whose model is the script."""
    agent = Agent(FunctionModel(script.respond), deps_type=MemoryRun,
                  toolsets=[memory_toolset()])
    agent.output_validator(memory_reminder)
    return agent
