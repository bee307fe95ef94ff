"""Ratings, adaptive scores, and the scoring config with its versions."""

from __future__ import annotations

from pydantic import Field

from schemas.answers.base import Answer, Instant
from schemas.answers.recall import AdaptivePart


class RatingAccepted(Answer):
    """A rating accepted: the worker applies it once, by its event id."""

    event_id: str
    agent_id: str
    rated: int


class Valuation(Answer):
    event_id: str
    useful: bool
    valued_at: Instant


class MemoryUse(Answer):
    """What one agent did with one memory (the inputs of its adaptive score), the adaptive
    score they make now, and the factor a recall multiplies the memory's raw score by."""

    valuation_count: int
    useful_count: int
    last_valuation_at: Instant | None
    access_count: int
    last_access_at: Instant | None
    adaptive: AdaptivePart
    blend_factor: float


class AgentMemoryUse(MemoryUse):
    agent_id: str


class MemoryScores(Answer):
    """One memory's adaptive score for the reading agent (`use`, and its latest ratings of
    it, newest first); or, read by an admin key bound to no agent that names none, every
    agent's (`agents`, the latest users first)."""

    namespace: str
    memory_id: str
    agent_id: str | None = None
    valuations: list[Valuation] = Field(default_factory=list)
    agents: list[AgentMemoryUse] = Field(default_factory=list)

    @property
    def use(self) -> MemoryUse | None:
        """The reading agent's use of the memory; None when `agents` are answered."""
        return None if self.agent_id is None else MemoryUse.model_validate(self.raw)


class ScoringParameter(Answer):
    """One parameter of the adaptive scoring: its value, its default and its range
    ([minimum, maximum], the minimum left out when `exclusive_minimum`; no maximum: none)."""

    name: str
    value: int | float
    default: int | float
    type: str
    minimum: float
    exclusive_minimum: bool
    maximum: float | None
    valid: str
    description: str


class ScoringSettings(Answer):
    """A namespace's adaptive scoring config in effect on the worker that answered, and its
    version (0: the defaults, never changed)."""

    namespace: str
    version: int
    changed_by: str | None
    changed_at: Instant | None
    config: dict[str, int | float]
    parameters: list[ScoringParameter]
    constraints: list[str]


class ScoringVersion(Answer):
    """One version of the config: what its change set, who, when, and every parameter
    after it."""

    version: int
    changes: dict[str, int | float]
    changed_by: str
    changed_at: Instant
    event_id: str
    config: dict[str, int | float]


class ScoringHistory(Answer):
    namespace: str
    versions: list[ScoringVersion]


class ScoringChangeAccepted(Answer):
    """A scoring change checked against the newest version and published: the worker
    applies it once, by its event id, as the next version."""

    namespace: str
    event_id: str
    checked_on_version: int
