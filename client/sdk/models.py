"""The API's answers as typed, frozen models (docs/http-api.md says what each field means).

Each keeps what the worker sent: a field these models do not name yet is kept and readable
as an attribute (`extra="allow"`), and `raw` is the JSON object as received, so an answer of
a newer worker still parses. Values of a closed set (kinds, review states, statuses) are
plain strings here for the same reason: a worker that learns a new one breaks no client.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    model_validator,
)


class Answer(BaseModel):
    """An answer of the API, or a part of one."""

    model_config = ConfigDict(extra="allow", frozen=True)
    _raw: dict[str, Any] = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_raw(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        parsed = handler(data)
        if isinstance(data, dict):
            parsed._raw = data
        return parsed

    @property
    def raw(self) -> dict[str, Any]:
        """The JSON object as the worker sent it."""
        return self._raw


# Search and the context pack.

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
    created_at: datetime
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
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    invalidated_by: str | None = None
    recorded_at: datetime | None = None
    # Of a search by related ids: those asked that the record lists.
    shared_related_ids: list[str] = Field(default_factory=list)
    # Of a record reached from a hit's links (expand): how.
    via: Via | None = None
    # With explain=true.
    explain: Explanation | None = None


class SearchAnswer(Answer):
    namespace: str
    hits: list[SearchHit]
    budget_exhausted: bool
    # The rest is absent when the run's search budget is spent.
    namespace_holds_records: bool | None = None
    query: str | None = None
    profile: str | None = None
    degraded: bool = False
    run_id: str | None = None
    max_searches_per_run: int | None = None


class Recency(Answer):
    created_at: datetime
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
    token_cost: int
    # With explain=true.
    explain: Explanation | None = None


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


class ContextPack(Answer):
    namespace: str
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
    budget_exhausted: bool = False
    namespace_holds_records: bool | None = None
    query: str | None = None
    profile: str | None = None
    budget_tokens: int | None = None
    # Candidates left out, by why: budget, duplicate.
    dropped: dict[str, int] = Field(default_factory=dict)
    run_id: str | None = None
    max_searches_per_run: int | None = None


class MemorySummary(Answer):
    """What memory holds about a query, in a token budget (`GET /v1/summary`)."""

    namespace: str
    # The summary, each memory cited by its id; None when the run's search budget is spent.
    summary: str | None
    # The memories it cites, in rank order.
    memory_ids: list[str]
    budget_exhausted: bool
    # True when the LLM hook rewrote the deterministic summary.
    rewritten: bool = False
    hits_found: int = 0
    hits_used: int = 0
    tokens: int = 0
    budget_tokens: int | None = None
    namespace_holds_records: bool | None = None
    query: str | None = None
    profile: str | None = None
    degraded: bool = False
    run_id: str | None = None
    max_searches_per_run: int | None = None


class ErrorSignature(Answer):
    signature_id: str
    dialect: str
    exception_type: str | None
    template: str
    frames: list[str]


class FixPattern(Answer):
    """A fix pattern as a lookup finds it; its body's fields (occurrences, fixes, success
    count, example, …) beside the record's."""

    record_id: str
    # `exact` (the error's own signature) or `similar`.
    match: str
    kind: str
    title: str | None
    text: str
    # None for the exact match.
    score: float | None
    created_at: datetime
    source_ref: str | None
    scope: str
    tags: list[str]
    related_ids: list[str]
    version: int
    occurrences: dict[str, Any] = Field(default_factory=dict)
    fixes: list[dict[str, Any]] = Field(default_factory=list)
    success_count: int = 0


class FixPatterns(Answer):
    namespace: str
    signature: ErrorSignature
    degraded: bool
    fix_patterns: list[FixPattern]


# Records, their versions and their lineage.

class Provenance(Answer):
    source_event_id: str
    source_topic: str
    source_partition: int
    source_offset: int
    producer: str


class Record(Answer):
    record_id: str
    namespace: str
    record_kind: str
    scope: str
    agent_id: str | None
    title: str | None
    text: str
    body: dict[str, Any]
    memory_type: str | None
    tags: list[str]
    related_ids: list[str]
    tier: str
    review_state: str
    trust_class: str
    source_ref: str | None
    run_ref: str | None
    thread: str | None = None
    provenance: Provenance
    created_at: datetime
    expires_at: datetime | None
    # When its fact stopped holding, and the memory that restated it with another value.
    valid_until: datetime | None = None
    invalidated_by: str | None = None


class LineageVersion(Answer):
    version: int
    text: str
    body: dict[str, Any]
    event_id: str
    changed_at: datetime


class SupersededMember(Answer):
    record_id: str
    version: int
    title: str | None
    text: str


class MergeMember(Answer):
    record_id: str
    version: int
    title: str | None
    # The start of its text.
    excerpt: str
    review_state: str
    superseded_by: str | None


class Standing(Answer):
    """Whether a record is in force; if not, what replaced it: the merge it went into, or
    the memory that restated it with another value (and from when)."""

    in_force: bool
    note: str | None
    merged_into: str | None = None
    invalidated_by: str | None = None
    valid_until: datetime | None = None


class StandingAt(Answer):
    """A record at a moment (`as_of`): whether it was in force (`in_force`,
    `not_recorded`, `superseded`, `expired`, `invalidated`) and its version then."""

    moment: datetime
    standing: str
    version: RecordVersion | None


class RecordLineage(Answer):
    record: Record
    version: int
    superseded_by: str | None
    versions: list[LineageVersion]
    supersedes: list[SupersededMember]
    # A merge's members, as they are now.
    members: list[MergeMember]
    # How sure memory is of it (docs/retrieval.md#confidence), and when memory learned it.
    confidence: float = 1.0
    recorded_at: datetime | None = None
    standing: Standing | None = None
    # Asked with as_of.
    as_of: StandingAt | None = None


# Many records: by their ids, or listed a page at a time.

class StoredRecord(Record):
    """A record read by id among others: as stored now, its version and what superseded it
    (if anything)."""

    version: int
    superseded_by: str | None


class RecordBatch(Answer):
    namespace: str
    # In the order asked.
    records: list[StoredRecord]
    # The ids asked that name no record the key may read.
    not_found: list[str]


class RecordSummary(Answer):
    record_id: str
    kind: str
    title: str | None
    # The first sentence of its text, on one line, cut to 120 characters.
    description: str
    memory_type: str | None
    tier: str
    scope: str
    agent_id: str | None
    review_state: str
    created_at: datetime
    updated_at: datetime


class RecordList(Answer):
    namespace: str
    # Newest first.
    records: list[RecordSummary]
    # The cursor of the next page; None on the last.
    next: str | None


class RecordVersion(Answer):
    """One version as history keeps it; its versioned fields (title, memory_type, tags,
    related_ids, review_state, tier) are attributes too."""

    version: int
    change: str
    actor: str | None
    event_id: str
    changed_at: datetime
    # The fields this version changed.
    changed: list[str]
    reason: str | None
    text: str


class RecordHistory(Answer):
    namespace: str
    record_id: str
    versions: list[RecordVersion]


class FieldChange(Answer):
    before: Any = Field(alias="from")
    after: Any = Field(alias="to")


class RecordDiff(Answer):
    namespace: str
    record_id: str
    from_version: int = Field(alias="from")
    to_version: int = Field(alias="to")
    fields: dict[str, FieldChange]
    # The text as a unified diff, line by line.
    text: list[str]


# Core blocks and what waits for review.

class BlockVersion(Answer):
    version: int
    actor: str | None
    event_id: str
    changed: list[str]
    changed_at: datetime
    usage_before_rotation: float
    archived_record_id: str | None


class CoreBlock(Answer):
    namespace: str
    agent_id: str
    label: str
    version: int
    text: str
    fields: dict[str, str | list[str]]
    chars: int
    max_chars: int
    usage: float
    strategy: str | None
    threshold: float | None
    versions: list[BlockVersion]


class BlockRef(Answer):
    agent_id: str
    label: str


class PendingDiff(Answer):
    diff_id: str
    # `record` or `block`.
    target: str
    base_version: int
    proposed: dict[str, Any]
    proposer: str
    proposed_at: datetime
    state: str
    record_id: str | None = None
    block: BlockRef | None = None


class PendingDiffs(Answer):
    namespace: str
    pending_diffs: list[PendingDiff]


class ReviewBody(Answer):
    """A `POST /v1/reviews` body as a queue item gives it, ready to send."""

    namespace: str
    decision: str
    record_id: str | None = None
    diff_id: str | None = None
    block: BlockRef | None = None


class ReviewBodies(Answer):
    route: str
    approve: ReviewBody
    reject: ReviewBody


class ReviewItem(Answer):
    """A pending diff (with the fields of `PendingDiff`), a draft merge (with its version,
    memory type, scope, agent and `members`) or a proposed lesson (with its version, memory
    type, scope, agent, `source_ref` and `related_ids`)."""

    # `pending_diff`, `draft_merge` or `proposed_lesson`.
    kind: str
    # What a review decides: the diff's id, or the merge's record id.
    id: str
    record_id: str | None
    title: str | None
    text: str | None
    proposer: str
    proposed_at: datetime
    review: ReviewBodies
    diff_id: str | None = None
    target: str | None = None
    block: BlockRef | None = None
    base_version: int | None = None
    proposed: dict[str, Any] | None = None
    state: str | None = None
    version: int | None = None
    memory_type: str | None = None
    scope: str | None = None
    agent_id: str | None = None
    members: list[MergeMember] = Field(default_factory=list)
    source_ref: str | None = None
    related_ids: list[str] = Field(default_factory=list)


class ReviewQueue(Answer):
    namespace: str
    items: list[ReviewItem]


# A namespace's state.

class Stats(Answer):
    namespace: str
    # Live records by kind, in Postgres.
    records: dict[str, int]
    index_points: int


class Change(Answer):
    record_id: str
    version: int
    change: str
    actor: str | None
    event_id: str
    changed_at: datetime
    changed: list[str]
    reason: str | None
    record_kind: str
    memory_type: str | None
    scope: str
    agent_id: str | None
    title: str | None
    excerpt: str
    # Resumes the feed after this change.
    cursor: str


class Changes(Answer):
    namespace: str
    changes: list[Change]
    # Resumes after the last change (where the request started, when none came).
    next: str


class GraphNode(Answer):
    record_id: str
    title: str | None
    excerpt: str
    memory_type: str | None
    kind: str
    review_state: str


class GraphEdge(Answer):
    source: str
    target: str
    # `related` or `wiki_link`.
    relation: str


class MemoryGraph(Answer):
    namespace: str
    truncated: bool
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    unresolved_links: int
    related_outside: int
    as_of: datetime | None = None
    # Asked with entities=true: those two or more of the nodes mention, and the mentions.
    entities: list[Entity] = Field(default_factory=list)
    mentions: list[GraphEdge] = Field(default_factory=list)


class Entity(Answer):
    """A name records mention, normalised (`key`), as first written (`name`), with the other
    forms it was written in and how many live records mention it."""

    key: str
    name: str
    entity_kind: str
    aliases: list[str]
    records: int
    first_seen: datetime


class EntityList(Answer):
    namespace: str
    entities: list[Entity]


class EntityRelation(Answer):
    """A relation of an entity: stated in a sentence or a page's wiki-link (`origin`
    pattern, wiki_link, llm), or read from the records that name both (`co_mention`); with
    how many records show it, up to five of them, and a confidence."""

    source: str
    target: str
    relation: str
    origin: str
    confidence: float
    records: int
    evidence: list[str]


class EntityRecord(Answer):
    record_id: str
    kind: str
    title: str | None
    excerpt: str


class EntityPage(Entity):
    """An entity with its relations and the latest records that mention it."""

    namespace: str
    relations: list[EntityRelation]
    mentioned_by: list[EntityRecord]


class Neighbour(Answer):
    """A record or an entity a walk reached: `hops` between records from the start, `via` the
    node it came from by `relation`, `strength` the product of its links' strengths. A
    record's fields (title, excerpt, kind ...) or an entity's (key, name, ...) are
    attributes too."""

    id: str
    type: str
    hops: int
    via: str | None
    relation: str | None
    strength: float


class Neighbourhood(Answer):
    namespace: str
    from_: str = Field(alias="from")
    depth: int
    as_of: datetime | None
    truncated: bool
    nodes: list[Neighbour]
    edges: list[GraphEdge]


class CountWindow(Answer):
    window_start: datetime
    memories: int


class CurrentWindow(Answer):
    start: datetime
    memories: int


class CountedRequest(Answer):
    request_id: str
    basis: str
    new_memories: int
    claimed_at: datetime
    sent_at: datetime | None


class TriggerRules(Answer):
    min_new_memories: int
    once_per_day: bool


class ConsolidationCounts(Answer):
    namespace: str
    window_s: float
    current_window: CurrentWindow
    # Newest first.
    windows: list[CountWindow]
    new_since_report: int
    reports_today: int
    last_report_id: str | None
    # Why no request is due (`report_today`, `too_few_new_memories`); None: one is.
    skip_reason: str | None
    last_request: CountedRequest | None
    rules: TriggerRules


class MaintenanceReport(Answer):
    report_id: str
    namespace: str
    reason: str
    started_at: datetime
    finished_at: datetime
    memories: int
    clusters: list[dict[str, Any]]
    merged_ids: list[str]
    new_ids: list[str]
    # Seconds by phase.
    timings: dict[str, float]
    announced_at: datetime | None


class ReportRecord(Answer):
    record_kind: str
    title: str | None
    excerpt: str


class ConsolidationReports(Answer):
    namespace: str
    # Newest first.
    reports: list[MaintenanceReport]
    # What names each record the reports list, of those the key may see.
    records: dict[str, ReportRecord]


# Runs.

class RunSummary(Answer):
    run_id: str
    # succeeded, failed, cancelled, or unfinished.
    status: str
    task_key: str | None
    repo: str | None
    agent: str | None
    intent: str | None
    started_at: datetime | None
    finished_at: datetime | None
    event_count: int
    # Distinct error signatures met.
    error_count: int


class RunList(Answer):
    namespace: str
    truncated: bool
    # Newest first.
    runs: list[RunSummary]


class RunEvent(Answer):
    event_id: str
    type: str
    occurred_at: datetime
    producer: str
    payload: dict[str, Any]


class RunDigest(Answer):
    record_id: str
    title: str | None
    text: str
    version: int
    review_state: str
    body: dict[str, Any]


class ErrorFixPattern(Answer):
    record_id: str
    title: str | None
    text: str
    version: int
    review_state: str
    occurrences: dict[str, Any] | None
    fixes: list[dict[str, Any]]
    success_count: int


class RunError(Answer):
    signature_id: str
    dialect: str
    exception_type: str | None
    template: str
    frames: list[str]
    count: int
    first_seen: datetime
    example: str
    fix_pattern: ErrorFixPattern | None


class FixedPattern(Answer):
    record_id: str
    title: str | None
    signature_id: str | None
    after_runs: list[str]


class RunHistory(Answer):
    namespace: str
    run: RunSummary
    # The first 500, oldest first.
    events: list[RunEvent]
    # None until the run finishes.
    digest: RunDigest | None
    errors: list[RunError]
    fixed: list[FixedPattern]


# Dead letters.

class TopicPosition(Answer):
    topic: str | None
    partition: int | None
    offset: int | None


class DeadLetter(Answer):
    dead_letter_id: str
    dead_lettered_at: datetime
    namespace: str | None
    source: TopicPosition
    dlq: TopicPosition
    key: str | None
    reason: str
    error: str
    error_class: str | None
    retriable: bool | None
    first_bytes: str
    first_bytes_utf8: bool
    size: int
    truncated: bool
    replay_command: str | None


class DeadLetterList(Answer):
    # None: every namespace's, and those of none.
    namespace: str | None
    # Newest first.
    dead_letters: list[DeadLetter]
    # How many the filters select in all, and by reason.
    total: int
    by_reason: dict[str, int]
    # Lists the older ones (`before`); None on the last page.
    next: str | None


# Keys.

class ApiKey(Answer):
    key_id: str
    # None: every namespace (an operator's key).
    namespace: str | None
    permissions: list[str]
    agent_id: str | None
    label: str
    created_at: datetime
    revoked_at: datetime | None


class MadeKey(ApiKey):
    # Shown in this answer only.
    token: str


class KeyList(Answer):
    keys: list[ApiKey]


# Writes: accepted (202), published to Kafka, not applied yet.

class MemoryWritten(Answer):
    # The id the memory will have once the worker stores it.
    record_id: str
    event_id: str
    topic: str


class ChangeAccepted(Answer):
    """An update, deprecation, restore or review, accepted. An update of a protected record
    waits for review: its event id is the pending diff's id."""

    record_id: str | None
    event_id: str


class BlockEditAccepted(Answer):
    agent_id: str
    label: str
    event_id: str


class RunEventAccepted(Answer):
    event_id: str
    run_id: str


class Health(Answer):
    """`ok`, `degraded` (the index is down; searches answer from Postgres), `stalled` or
    `down`, with what was checked and what is wrong (crashed agents, stalled partitions)."""

    status: str
    role: str
    postgres: str
    index: str | None = None
    agents: dict[str, str] = Field(default_factory=dict)
    stalled: dict[str, str] = Field(default_factory=dict)


class Handoff(Answer):
    """The handoff an agent's last session left (docs/sessions.md)."""

    record_id: str
    session_id: str
    title: str | None
    text: str
    next_steps: list[str]
    slept_at: datetime


class Woke(Answer):
    """A session started: what the agent needs first. `handoff` is None before the agent's
    first sleep (or while its handoff is on its way); `context` is the pack for the task,
    the agent's core blocks first (without a task: the core blocks alone), None when memory
    is disabled."""

    namespace: str
    session_id: str
    agent_id: str
    task: str
    event_id: str
    handoff: Handoff | None
    context: ContextPack | None


class SessionStepAccepted(Answer):
    """A checkpoint (`record_ids`: its memories) or a sleep (`handoff_record_id`), accepted:
    the ids the memories will have once the worker stores them."""

    session_id: str
    event_id: str
    record_ids: list[str] = []
    handoff_record_id: str | None = None


class SessionEventEntry(Answer):
    event_id: str
    type: str
    occurred_at: datetime
    producer: str
    payload: dict[str, Any]


class Session(Answer):
    """A session's ledger: its events in the order applied."""

    namespace: str
    session_id: str
    agent_id: str
    task: str
    # `awake`, or `asleep` once it slept.
    state: str
    woke_at: datetime
    slept_at: datetime | None
    handoff_record_id: str | None
    events: list[SessionEventEntry]


class RatingAccepted(Answer):
    """A rating accepted: the worker applies it once, by its event id."""

    event_id: str
    agent_id: str
    rated: int


class Valuation(Answer):
    event_id: str
    useful: bool
    valued_at: datetime


class MemoryUse(Answer):
    """What one agent did with one memory (the inputs of its adaptive score), the adaptive
    score they make now, and the factor a recall multiplies the memory's raw score by."""

    valuation_count: int
    useful_count: int
    last_valuation_at: datetime | None
    access_count: int
    last_access_at: datetime | None
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
    changed_at: datetime | None
    config: dict[str, int | float]
    parameters: list[ScoringParameter]
    constraints: list[str]


class ScoringVersion(Answer):
    """One version of the config: what its change set, who, when, and every parameter
    after it."""

    version: int
    changes: dict[str, int | float]
    changed_by: str
    changed_at: datetime
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

# Gaps.

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
    first_seen: datetime
    last_seen: datetime
    status: str
    # The memory that answered it, at what relevance, when; None while open.
    resolved_by: str | None
    relevance: float | None
    resolved_at: datetime | None


class GapResolution(Answer):
    record_id: str
    relevance: float | None
    resolved_at: datetime | None


class GapGroup(Answer):
    """Gaps that ask one question, as far as the key sees them."""

    group_id: int
    # open while one of its gaps is.
    status: str
    # Its most met gap's words.
    question: str
    times: int
    first_seen: datetime
    last_seen: datetime
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


class DocumentAccepted(Answer):
    """A doc.upsert or doc.delete accepted: the worker applies it (docs/documents.md)."""

    event_id: str
    namespace: str
    doc_id: str


class DocumentSummary(Answer):
    """A document as the list shows it; `deleted` is when it was deleted, if it was."""

    doc_id: str
    title: str | None
    repo: str | None
    security_scope: str | None
    content_type: str
    chunks: int
    version: int
    content_hash: str
    created: datetime
    updated: datetime
    deleted: datetime | None


class DocumentList(Answer):
    namespace: str
    documents: list[DocumentSummary]


class DocumentChunkView(Answer):
    record_id: str
    position: int
    heading_path: list[str]
    token_count: int
    text: str
    added_version: int


class DocumentVersionView(Answer):
    """A version of a document: what it changed among its chunks."""

    version: int
    event_id: str
    change: str
    content_hash: str | None
    chunks: int
    added: int
    kept: int
    removed: int
    applied_at: datetime


class Document(Answer):
    """A document with its live chunks in order and every version it had."""

    namespace: str
    document: DocumentSummary
    chunks: list[DocumentChunkView]
    versions: list[DocumentVersionView]


class PlanningItem(Answer):
    """A Beads work item of a repository's planning (docs/planning.md)."""

    id: str
    title: str
    status: str
    priority: int
    issue_type: str
    assignee: str | None
    labels: list[str]
    parent: str | None
    # Open, and nothing it waits for still open.
    ready: bool
    # The ids of its blockers still open.
    blockers: list[str]
    close_reason: str | None
    created_at: str | None
    updated_at: str | None


class PlanningItems(Answer):
    namespace: str
    repo: str
    # ["planning"] when the file could not be read: the items as memstream last read them.
    degraded: list[str]
    degraded_why: str | None
    items: list[PlanningItem]


class PlanningBlocker(Answer):
    id: str
    kind: str
    # None for an item the file does not hold (another repository's).
    status: str | None
    title: str | None
    open: bool


class PlanningDependency(Answer):
    id: str
    kind: str
    status: str | None
    title: str | None


class PlanningItemDetail(PlanningItem):
    description: str
    acceptance_criteria: str
    # Every field as Beads wrote it.
    fields: dict[str, Any]


class PlanningContext(Answer):
    """An item's planning context: the item, its dependencies, blockers, ready siblings."""

    namespace: str
    repo: str
    degraded: list[str]
    degraded_why: str | None
    item: PlanningItemDetail
    dependencies: list[PlanningDependency]
    blockers: list[PlanningBlocker]
    ready_siblings: list[PlanningItem]


class PlanningSyncAccepted(Answer):
    repo: str
    event_id: str
