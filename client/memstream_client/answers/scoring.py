"""Ratings, adaptive scores, and the scoring config with its versions."""

from __future__ import annotations

from pydantic import Field

from memstream_client.answers.base import Answer, Instant
from memstream_client.answers.recall import AdaptivePart


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
    """One memory's adaptive score for the reading agent (its use, and its latest ratings of
    it, newest first); or, read by an admin key bound to no agent that names none, every
    agent's (`agents`, the latest users first). The fields of the reading agent's use are
    there exactly when `agent_id` is (`use` gathers them); `agents` exactly when it is not."""

    namespace: str
    # The reading agent, and its use of the memory (the fields of `MemoryUse`).
    agent_id: str | None = None
    memory_id: str
    valuation_count: int | None = None
    useful_count: int | None = None
    last_valuation_at: Instant | None = None
    access_count: int | None = None
    last_access_at: Instant | None = None
    adaptive: AdaptivePart | None = None
    blend_factor: float | None = None
    valuations: list[Valuation] = Field(default_factory=list)
    agents: list[AgentMemoryUse] = Field(default_factory=list)

    @property
    def use(self) -> MemoryUse | None:
        """The reading agent's use of the memory; None when `agents` are answered."""
        if self.agent_id is None:
            return None
        return MemoryUse.model_validate(self.model_dump(include=set(MemoryUse.model_fields)))


class ScoringParameter(Answer):
    """One parameter of the adaptive scoring: its value, its default and its range
    ([minimum, maximum], the minimum left out when `exclusive_minimum`; no maximum: none)."""

    name: str
    value: int | float
    default: int | float
    type: str
    # As the parameter declares them: an integer bound is answered as one.
    minimum: int | float
    exclusive_minimum: bool
    maximum: int | float | None
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
