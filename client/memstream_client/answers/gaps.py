"""Gaps: what agents needed and memory did not hold, grouped by question."""

from __future__ import annotations

from memstream_client.answers.base import Answer, Instant


class Gap(Answer):
    """One agent's gap (none: met by keys bound to no agent), in its words."""

    gap_id: int
    agent_id: str | None
    # explicit: named in a rating; implicit: a recall that showed nothing.
    source: str
    text: str
    # The search that missed it.
    query: str | None
    times: int
    first_seen: Instant
    last_seen: Instant
    status: str
    # The memory that answered it, at what relevance, when; None while open.
    resolved_by: str | None
    relevance: float | None
    resolved_at: Instant | None


class GapResolution(Answer):
    record_id: str
    relevance: float | None
    resolved_at: Instant | None


class GapGroup(Answer):
    """Gaps that ask one question, as far as the key sees them."""

    group_id: int
    # open while one of its gaps is.
    status: str
    # Its most met gap's words.
    question: str
    times: int
    first_seen: Instant
    last_seen: Instant
    agents: list[str]
    sources: list[str]
    gap_count: int
    # The most met first, at most 10.
    gaps: list[Gap]
    # The latest first.
    resolved_by: list[GapResolution]


class GapList(Answer):
    namespace: str
    status: str
    # The agent whose gaps the key reads beside those of no agent; None: an admin key's
    # every agent, or another key's gaps of no agent.
    agent_id: str | None
    # The most recently met first.
    groups: list[GapGroup]
    # Lists the next page (`cursor`); None on the last.
    next: str | None
