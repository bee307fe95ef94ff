"""Search, the context pack, the summary and fix patterns, as answered."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from memstream_client.answers.base import Answer, Instant


class Ranks(Answer):
    dense: int | None
    lexical: int | None


class ListPlace(Answer):
    """A record's place in one of search's two lists: its rank and score there (None: not in
    it; dense: the cosine, lexical: BM25), and that score scaled over the list."""

    rank: int | None
    score: float | None
    scaled: float


class AdaptivePart(Answer):
    """The agent's adaptive score of a record (seed 003) and its three parts."""

    score: float
    usefulness: float
    recency: float
    frequency: float
    config_version: int


class Explanation(Answer):
    """How a hit's score was made (`explain=true`): fused from both lists, weighed by the
    profile, multiplied by the blend of the agent's adaptive score (1 without an agent)."""

    dense: ListPlace
    lexical: ListPlace
    fused: float
    profile_weight: float
    adaptive: AdaptivePart | None
    blend_factor: float
    score: float
    support: float
    relevance: float


class Via(Answer):
    """How a recall reached a record from one of its hits."""

    # The hit it was reached from, the hops between, the record or entity it came by last,
    # and the link it followed from there.
    from_: str = Field(alias="from")
    hops: int
    last: str | None
    relation: str | None
    strength: float


class Contest(Answer):
    """A correction awaiting review (docs/lifecycle.md#a-correction-awaiting-review): the memory
    `newer` restated `older` with another value, and the invalidation of `older` waits for a
    reviewer as the pending diff `diff_id`. Until then `older` stays in force, ranked below
    `newer`; approving the diff takes it out of recall, rejecting it ends the contest."""

    older: str
    newer: str
    diff_id: str


class SearchHit(Answer):
    record_id: str
    kind: str
    title: str | None
    text: str
    # Fused and weighed by the profile: what ranks.
    score: float
    # None for a search by related ids alone: no query was embedded.
    similarity: float | None
    # What `min_score` is a floor on.
    relevance: float
    ranks: Ranks
    created_at: Instant
    source_ref: str | None
    member_source_refs: list[str]
    scope: str
    memory_type: str | None
    tags: list[str]
    related_ids: list[str]
    tier: str
    review_state: str
    trust_class: str
    # The repository it belongs to (none: the namespace's), and who may be shown it.
    repo: str | None = None
    security_scope: str | None = None
    # How sure memory is of it, in [0, 1] (docs/retrieval.md#confidence).
    confidence: float = 1.0
    # When its fact held (until a newer memory restated it with another value:
    # `invalidated_by`), and when memory learned it.
    valid_from: Instant | None = None
    valid_until: Instant | None = None
    invalidated_by: str | None = None
    recorded_at: Instant | None = None
    # Of a search by related ids: those asked that the record lists.
    shared_related_ids: list[str] = Field(default_factory=list)
    # Of a record reached from a hit's links (expand): how.
    via: Via | None = None
    # With explain=true.
    explain: Explanation | None = None
    # Absent unless a correction of it waits for a reviewer: which memory, which diff.
    contested: Contest | None = None
    # Absent unless it is that correction of other hits (or was brought in for them).
    corrects: list[Contest] = Field(default_factory=list)


class Recalled(Answer):
    """What a recall (a search, a summary, a context pack) answers beside what it found:
    the question and the profile it was asked with, and whether the namespace holds any
    record (a misspelled namespace holds none). When the run's search budget is spent, the
    answer says so with the run and its budget, and finds nothing."""

    namespace: str
    budget_exhausted: bool = False
    namespace_holds_records: bool | None = None
    query: str | None = None
    profile: str | None = None
    run_id: str | None = None
    max_searches_per_run: int | None = None


class SearchAnswer(Recalled):
    hits: list[SearchHit]
    # True when the index failed and Postgres answered.
    degraded: bool = False


class Recency(Answer):
    created_at: Instant
    age_days: float


class ContextItem(Answer):
    record_id: str
    kind: str
    text: str
    source: str
    trust_class: str
    provenance: dict[str, Any]
    recency: Recency
    score: float
    # What it takes of the budget: its text, and the pack's note when it is contested.
    token_cost: int
    # With explain=true.
    explain: Explanation | None = None
    # As a search hit's: absent unless contested, or a correction of other items.
    contested: Contest | None = None
    corrects: list[Contest] = Field(default_factory=list)


class PackedCoreBlock(Answer):
    label: str
    version: int
    # The fields that fit in the core's share of the budget, one line each.
    text: str
    token_cost: int
    # The fields that did not fit: read the whole block with `block(label)`.
    fields_left_out: list[str]


class CoreSection(Answer):
    """The pack's first section: the core blocks of the agent it is read as, within at most
    half the budget (docs/retrieval.md)."""

    agent_id: str | None
    # Why there are no blocks (no agent, none kept, their store failed); None when there are.
    absent: str | None
    tokens: int
    share_tokens: int
    # Whether a block lost fields to the budget.
    truncated: bool
    blocks: list[PackedCoreBlock]


class SectionTokens(Answer):
    """What one section of a pack was given of the budget, and what its items cost."""

    share_tokens: int
    tokens: int
    items: int


class ContextPack(Recalled):
    # `sections` by name, in order: planning, history, long_term, documents (after `core`).
    sections: dict[str, list[ContextItem]]
    # By section: its share of the budget the core left, and what its items took.
    section_tokens: dict[str, SectionTokens] = Field(default_factory=dict)
    # None when memory is disabled or the run's search budget is spent.
    core: CoreSection | None = None
    tokens: int
    # The parts left out because their store failed (`index`: Postgres answered instead).
    degraded: list[str]
    # False when the worker runs with MEMORY_ENABLED off: then nothing else is given.
    enabled: bool = True
    budget_tokens: int | None = None
    # Candidates left out, by why: budget, duplicate.
    dropped: dict[str, int] = Field(default_factory=dict)
    # One line for each contested item packed: "mem_A is contested by the newer mem_B, …
    # (pending review, diff inv_…)". Absent when none is.
    notes: list[str] = Field(default_factory=list)


class MemorySummary(Recalled):
    """What memory holds about a query, in a token budget (`GET /v1/summary`)."""

    # The summary, each memory cited by its id; None when the run's search budget is spent.
    summary: str | None
    # The memories it cites, in rank order.
    memory_ids: list[str]
    # True when the LLM hook rewrote the deterministic summary.
    rewritten: bool = False
    hits_found: int = 0
    hits_used: int = 0
    tokens: int = 0
    budget_tokens: int | None = None
    degraded: bool = False
    # The contests of the memories it cites, which its text marks. Absent when none is.
    contested: list[Contest] = Field(default_factory=list)


class ErrorSignature(Answer):
    signature_id: str
    dialect: str
    exception_type: str | None
    template: str
    frames: list[str]


class FixPattern(Answer):
    """A fix pattern as a lookup finds it: the record, and what its body keeps of the error's
    signature, its occurrences and the runs that fixed it (docs/run-history.md)."""

    record_id: str
    # `exact` (the error's own signature) or `similar`.
    match: str
    kind: str
    title: str | None
    text: str
    # None for the exact match.
    score: float | None
    created_at: Instant
    source_ref: str | None
    scope: str
    tags: list[str]
    related_ids: list[str]
    version: int
    signature_id: str | None = None
    dialect: str | None = None
    exception_type: str | None = None
    template: str | None = None
    frames: list[str] = Field(default_factory=list)
    # The first error met with this signature, as it was written.
    example: str | None = None
    # How often and when it was met, and in which runs (the latest).
    occurrences: dict[str, Any] = Field(default_factory=dict)
    # The runs that succeeded after it, and what they changed.
    fixes: list[dict[str, Any]] = Field(default_factory=list)
    success_count: int = 0


class FixPatterns(Answer):
    namespace: str
    signature: ErrorSignature
    degraded: bool
    fix_patterns: list[FixPattern]
