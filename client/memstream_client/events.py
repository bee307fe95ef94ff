"""Event contracts: the envelope every event carries and the payload of each event type.

Events are JSON so that any Kafka client can publish them; `schemas/json/` holds the JSON
Schema exported from these models (`python -m schemas.export`).
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    StrictBool,
    StringConstraints,
    WithJsonSchema,
    model_validator,
)

SCHEMA_VERSION: Literal[1] = 1
MAX_RELATED_IDS = 10
MAX_TAGS = 20

Namespace = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:\-]{0,127}$")
]
Identifier = Annotated[str, StringConstraints(min_length=1, max_length=200)]
# A Beads item id: `prefix-hash`, `prefix-N`, or a child's `prefix-hash.N`.
ItemId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,199}$")]
Tag = Annotated[str, StringConstraints(min_length=1, max_length=64)]
MemoryType = Literal[
    "lesson", "decision", "pattern", "fact", "preference", "handoff", "commitment",
    "relationship",
]
Scope = Literal["shared", "personal"]
# Seed 002's memory scopes, accepted on a write beside shared and personal: `user` is the
# writer's personal vault, `team` the whole namespace, `project` the namespace within one repo
# (shared, with a `repo`). A record keeps shared or personal, and its repo (docs/lifecycle.md).
WriteScope = Literal["shared", "personal", "project", "team", "user"]
# A repository a record belongs to. `*` is not a repo name: the index marks records of no
# repo with it (stores/index_payload.NAMESPACE_WIDE).
Repo = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.][A-Za-z0-9._/:@+\-]{0,199}$")]
# Who may be shown a record (seed 002's `security_scope`): a label such as `public`,
# `internal` or `restricted`, which searches and packs may narrow to.
SecurityScope = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_\-]{0,63}$")]
Tier = Literal["active", "short_term", "long_term"]
ReviewState = Literal["draft", "approved", "deprecated"]
TrustClass = Literal["raw", "derived", "approved"]
RunStatus = Literal["succeeded", "failed", "cancelled"]
StepKind = Literal["tool_call", "status_change", "decision", "note", "error", "retry"]
ArtifactKind = Literal["log", "patch", "test_result", "report", "other"]
Ref = Annotated[str, StringConstraints(min_length=1, max_length=1000)]


def _in_utc(moment: datetime) -> datetime:
    """Postgres keeps instants in UTC: one whose offset pushes it past the years 1-9999 has
    no UTC form and is invalid."""
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise ValueError("the time has no UTC form (its offset leaves years 1-9999)") from None


# An aware time, normalised to UTC.
Instant = Annotated[AwareDatetime, AfterValidator(_in_utc)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Payload(_Strict):
    # Prose fields: free text in which intake strips U+0000 and replaces lone surrogates
    # (recording what it changed); every other string holding them is refused.
    PROSE: ClassVar[frozenset[str]] = frozenset()


class _EnvelopeFields(_Strict):
    event_id: Identifier = Field(description="Idempotency key: a replayed event_id is a no-op.")
    schema_version: Literal[1] = SCHEMA_VERSION
    namespace: Namespace = Field(description="Isolation boundary: no read or write crosses it.")
    occurred_at: Instant
    producer: Annotated[str, StringConstraints(min_length=1, max_length=200)]


class Envelope(_EnvelopeFields):
    """What every event carries, whatever its type."""

    type: str
    payload: dict[str, Any]


class RunStartedPayload(_Payload):
    PROSE = frozenset({"intent"})

    run_id: Identifier
    intent: Annotated[str, StringConstraints(max_length=4000)] = ""
    agent: Annotated[str, StringConstraints(max_length=200)] = ""
    task_key: Identifier | None = None
    repo: Annotated[str, StringConstraints(max_length=500)] | None = None
    planning_ref: ItemId | None = Field(
        default=None, description="The work item of the repo's planning (a Beads id) the run "
        "works on: the run claims it, and its finish closes it (docs/planning.md).")

    @model_validator(mode="after")
    def _planning_ref_names_its_repo(self) -> RunStartedPayload:
        if self.planning_ref is not None and not self.repo:
            raise ValueError("a planning_ref needs the run's repo, whose planning holds it")
        return self


class RunStepPayload(_Payload):
    PROSE = frozenset({"text", "status", "error"})

    run_id: Identifier
    kind: StepKind
    text: Annotated[str, StringConstraints(max_length=16000)] = ""
    tool: Annotated[str, StringConstraints(max_length=200)] | None = None
    status: Annotated[str, StringConstraints(max_length=200)] | None = None
    error: Annotated[str, StringConstraints(max_length=32000)] | None = Field(
        default=None, description="The error message or the whole traceback (kind error)."
    )
    attempt: Annotated[int, Field(ge=1, le=10000)] | None = Field(
        default=None, description="Which attempt this retry starts (kind retry)."
    )

    @model_validator(mode="after")
    def _error_step_says_what_failed(self) -> RunStepPayload:
        if self.kind == "error" and not (self.error or self.text).strip():
            raise ValueError("an error step needs its error text or traceback in `error`")
        return self


class RunArtifactPayload(_Payload):
    PROSE = frozenset({"title", "summary"})

    run_id: Identifier
    kind: ArtifactKind
    ref: Ref = Field(description="Where the artifact lives: a path, a URL, an object key.")
    title: Annotated[str, StringConstraints(max_length=200)] = ""
    summary: Annotated[str, StringConstraints(max_length=4000)] = ""


class RunFinishedPayload(_Payload):
    PROSE = frozenset({"summary", "error", "next_steps"})

    run_id: Identifier
    status: RunStatus
    summary: Annotated[str, StringConstraints(max_length=16000)] = ""
    error: Annotated[str, StringConstraints(max_length=32000)] | None = None
    commits: list[Identifier] = Field(default_factory=list, max_length=200)
    pull_requests: list[Ref] = Field(
        default_factory=list, max_length=50, description="PR or merge-request references."
    )
    files_changed: list[Annotated[str, StringConstraints(max_length=1000)]] = Field(
        default_factory=list, max_length=1000
    )
    next_steps: list[Annotated[str, StringConstraints(max_length=2000)]] = Field(
        default_factory=list, max_length=50
    )


class MemoryWritePayload(_Payload):
    PROSE = frozenset({"text", "title"})

    text: Annotated[str, StringConstraints(min_length=1, max_length=8000)]
    title: Annotated[str, StringConstraints(max_length=200)] | None = None
    memory_type: MemoryType = "fact"
    tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)
    related_ids: list[Identifier] = Field(default_factory=list, max_length=MAX_RELATED_IDS)
    scope: WriteScope = Field(
        default="shared", description="shared or team: the namespace; personal or user: the "
        "agent_id's vault; project: the namespace within `repo`.")
    agent_id: Identifier | None = Field(
        default=None, description="Owner of a personal vault; required when scope is personal "
        "or user."
    )
    repo: Repo | None = Field(
        default=None, description="The repository the memory belongs to; required when scope "
        "is project. A search or pack narrowed to a repo reads its memories and those of no "
        "repo.")
    security_scope: SecurityScope | None = Field(
        default=None, description="Who may be shown it (public, internal, restricted, ...): a "
        "search or pack narrowed to security scopes reads only records labelled with one.")
    tier: Tier = "active"
    review_state: ReviewState = "approved"
    trust_class: TrustClass = "raw"
    source_ref: Annotated[str, StringConstraints(max_length=1000)] | None = Field(
        default=None, description="Where the writer found this (a URL, a run id, a file)."
    )
    thread: Identifier | None = Field(
        default=None,
        description="The conversation, session or document this memory is one part of, "
        "written in order: the memory before it in its thread is indexed beside it, as its "
        "context at retrieval.",
    )
    expires_at: Instant | None = None

    @model_validator(mode="after")
    def _personal_scope_has_owner(self) -> MemoryWritePayload:
        if self.scope in ("personal", "user") and self.agent_id is None:
            raise ValueError(f"a {self.scope} memory needs agent_id (the owner of the vault)")
        if self.scope == "project" and self.repo is None:
            raise ValueError("a project memory needs repo (the project it belongs to)")
        return self

    @property
    def record_scope(self) -> Scope:
        """Who reads the record: its owner alone (personal, user) or its namespace."""
        return "personal" if self.scope in ("personal", "user") else "shared"


Version = Annotated[int, Field(ge=1)]

BlockLabel = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_\-]{0,63}$")]
BlockField = Annotated[str, StringConstraints(pattern=r"^[A-Z][A-Z0-9_]{0,31}$")]
BlockItem = Annotated[str, StringConstraints(min_length=1, max_length=1000)]
RotationStrategy = Literal["aggressive", "preservative", "adaptive"]


class BlockRef(_Strict):
    """One core memory block: an agent's block of that label."""

    agent_id: Identifier
    label: BlockLabel


class MemoryUpdatePayload(_Payload):
    """A change to a stored memory: the fields given replace the current ones."""

    PROSE = frozenset({"text", "title"})

    record_id: Identifier
    expected_version: Version = Field(
        description="The version the writer saw: an update of any other version is stale and "
        "refused (stale_version), so that no change is lost silently."
    )
    text: Annotated[str, StringConstraints(min_length=1, max_length=8000)] | None = None
    title: Annotated[str, StringConstraints(max_length=200)] | None = None
    memory_type: MemoryType | None = None
    tags: list[Tag] | None = Field(default=None, max_length=MAX_TAGS)
    related_ids: list[Identifier] | None = Field(default=None, max_length=MAX_RELATED_IDS)

    @model_validator(mode="after")
    def _changes_something(self) -> MemoryUpdatePayload:
        # A field given as null sets nothing, as one left out.
        if not any(getattr(self, name) is not None
                   for name in self.model_fields_set & UPDATABLE_FIELDS):
            raise ValueError(f"an update sets one of {', '.join(sorted(UPDATABLE_FIELDS))} "
                             "(null sets nothing)")
        return self


UPDATABLE_FIELDS = frozenset({"text", "title", "memory_type", "tags", "related_ids"})


class MemoryDeprecatePayload(_Payload):
    """Take a memory out of every answer; it stays readable by id, with its history."""

    PROSE = frozenset({"reason"})

    record_id: Identifier
    reason: Annotated[str, StringConstraints(min_length=1, max_length=2000)]
    expected_version: Version | None = None


ReviewDecision = Literal["approve", "reject"]


class MemoryReviewPayload(_Payload):
    """A reviewer's decision on a draft memory, on a pending diff of a record (`record_id`
    and `diff_id`), or on a pending diff of a core block (`block` and `diff_id`)."""

    PROSE = frozenset({"note"})

    record_id: Identifier | None = None
    block: BlockRef | None = None
    decision: ReviewDecision
    reviewer: Identifier
    diff_id: Identifier | None = Field(
        default=None, description="The pending diff decided on; none: the draft record itself."
    )
    note: Annotated[str, StringConstraints(max_length=2000)] | None = None

    @model_validator(mode="after")
    def _names_one_target(self) -> MemoryReviewPayload:
        if (self.record_id is None) == (self.block is None):
            raise ValueError("a review names either record_id or block")
        if self.block is not None and self.diff_id is None:
            raise ValueError("a review of a block decides one of its pending diffs: diff_id")
        return self


class MemoryRestorePayload(_Payload):
    """Bring a memory back to an earlier version's content, as a new version."""

    record_id: Identifier
    version: Version = Field(description="The version whose content comes back.")
    expected_version: Version | None = None


class MemoryBlockPayload(_Payload):
    """An edit of one of an agent's core memory blocks (seed 004): `persona`, `human`, or
    any label. A block is bracketed fields, one a line (`[TASK] Brainstorm essay topics`);
    a field holds a text or a list of items (`[PREFS] Socratic questions; Detailed feedback`).
    """

    agent_id: Identifier
    label: BlockLabel
    set: dict[BlockField, Annotated[str, StringConstraints(max_length=2000)] | list[BlockItem]] \
        = Field(default_factory=dict, max_length=20,
                description="Fields replaced; an empty text or list removes the field.")
    append: dict[BlockField, list[BlockItem]] = Field(
        default_factory=dict, max_length=20,
        description="Items added at the end of list fields (a rolling context, learned facts).")
    strategy: RotationStrategy | None = Field(
        default=None, description="How the block rotates into archival memory once full: "
        "aggressive (at 70%), preservative (90%), adaptive (80%, moving with how often it "
        "rotates). Kept by the block; adaptive when never given.")
    expected_version: Version | None = None

    @model_validator(mode="after")
    def _edits_something(self) -> MemoryBlockPayload:
        if not self.set and not self.append and self.strategy is None:
            raise ValueError("a block edit sets, appends or chooses a strategy")
        both = self.set.keys() & self.append.keys()
        if both:
            raise ValueError(f"a field is either set or appended to: {', '.join(sorted(both))}")
        return self


MAX_RATINGS = 50


class MemoryRating(_Strict):
    """One agent's judgment of one memory it was given: it helped, or it did not."""

    memory_id: Identifier
    useful: StrictBool = Field(description="Whether the memory helped: a plain true or false "
                               "(seed 003: agents are reliable at binary judgments).")


class MemoryRatePayload(_Payload):
    """An agent rates memories it was given (seed 003's rate_memories), and may say what it
    needed and did not find (a gap). Each memory must exist and be one the agent may see:
    shared, or personal to it; one that is not dead-letters the whole event."""

    PROSE = frozenset({"gap", "gap_query"})

    agent_id: Identifier = Field(description="The rater: whose score of each memory moves.")
    ratings: list[MemoryRating] = Field(min_length=1, max_length=MAX_RATINGS)
    gap: Annotated[str, StringConstraints(min_length=1, max_length=2000)] | None = Field(
        default=None, description="What the agent needed and memory did not hold.")
    gap_query: Annotated[str, StringConstraints(min_length=1, max_length=1000)] | None = \
        Field(default=None, description="What the agent searched for when it met the gap.")

    @model_validator(mode="after")
    def _each_memory_once(self) -> MemoryRatePayload:
        counts = Counter(rating.memory_id for rating in self.ratings)
        twice = sorted(memory_id for memory_id, count in counts.items() if count > 1)
        if twice:
            raise ValueError(f"each memory is rated once per event: {', '.join(twice)}")
        if self.gap_query is not None and self.gap is None:
            raise ValueError("gap_query says what was searched for a gap: it needs the gap")
        return self


MAX_SCORING_CHANGES = 20


def _number(value: object) -> int | float:
    """A JSON number as it came (an integer stays one): a boolean or a string of digits is
    no number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"must be a number (got {type(value).__name__})")
    return value


ScoringParameter = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,63}$")]
# One error per value that is not a number (a union of int and float would give two).
ScoringValue = Annotated[int | float, PlainValidator(_number),
                         WithJsonSchema({"type": "number"})]


class MemoryScoringPayload(_Payload):
    """A change of the namespace's adaptive scoring config (seed 003's parameters): each
    parameter named takes its new value, the others keep theirs. The worker applies it to the
    newest config as the next version once the result is valid as a whole (each value in its
    range, the three blend weights summing to 1); a change it refuses dead-letters the event
    (docs/retrieval.md#adaptive-scores-seed-003)."""

    changes: dict[ScoringParameter, ScoringValue] = Field(
        min_length=1, max_length=MAX_SCORING_CHANGES,
        description="Parameter name -> its new value (a JSON number).")
    changed_by: Identifier = Field(
        description="Who changed it; over HTTP the key that did (key:<key id>).")
    expected_version: Annotated[int, Field(ge=0)] | None = Field(
        default=None, description="The version the change was made on (0: the defaults, "
        "never changed): a change of any other version is stale and refused (stale_version), "
        "so that no change is made on a config its author did not see. None: the newest.")


class RunStarted(_EnvelopeFields):
    type: Literal["run.started"]
    payload: RunStartedPayload


class RunStep(_EnvelopeFields):
    type: Literal["run.step"]
    payload: RunStepPayload


class RunArtifact(_EnvelopeFields):
    type: Literal["run.artifact"]
    payload: RunArtifactPayload


class RunFinished(_EnvelopeFields):
    type: Literal["run.finished"]
    payload: RunFinishedPayload


class MemoryWrite(_EnvelopeFields):
    type: Literal["memory.write"]
    payload: MemoryWritePayload


class MemoryUpdate(_EnvelopeFields):
    type: Literal["memory.update"]
    payload: MemoryUpdatePayload


class MemoryDeprecate(_EnvelopeFields):
    type: Literal["memory.deprecate"]
    payload: MemoryDeprecatePayload


class MemoryReview(_EnvelopeFields):
    type: Literal["memory.review"]
    payload: MemoryReviewPayload


class MemoryRestore(_EnvelopeFields):
    type: Literal["memory.restore"]
    payload: MemoryRestorePayload


class MemoryBlock(_EnvelopeFields):
    type: Literal["memory.block"]
    payload: MemoryBlockPayload


class MemoryRate(_EnvelopeFields):
    type: Literal["memory.rate"]
    payload: MemoryRatePayload


class MemoryScoring(_EnvelopeFields):
    type: Literal["memory.scoring"]
    payload: MemoryScoringPayload


ConsolidateReason = Literal["new_memories", "manual"]


class ConsolidatePayload(_Payload):
    reason: ConsolidateReason = Field(
        description="new_memories: the windowed counts reached the threshold (the short-circuit "
        "rules apply); manual: an operator asked (they do not)."
    )
    new_memories: Annotated[int, Field(ge=0)] = Field(
        default=0, description="Memories counted since the namespace's previous trigger."
    )


class ConsolidateRequest(_EnvelopeFields):
    """On `memory.consolidate`, keyed by namespace: consolidate this namespace's memories.
    Its event_id identifies the run: a re-delivered request changes nothing."""

    type: Literal["memory.consolidate"]
    payload: ConsolidatePayload


MAX_SESSION_MEMORIES = 20
MAX_NEXT_STEPS = 20


class SessionMemory(_Strict):
    """One memory an agent stores at a checkpoint: written as a `memory.write` of its
    session's thread, personal to the session's agent unless shared."""

    text: Annotated[str, StringConstraints(min_length=1, max_length=8000)]
    title: Annotated[str, StringConstraints(max_length=200)] | None = None
    memory_type: MemoryType = "fact"
    tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)
    scope: Scope = "personal"


class SessionWokePayload(_Payload):
    """An agent starts a session on a task (seed 003's wake)."""

    PROSE = frozenset({"task"})

    session_id: Identifier
    agent_id: Identifier = Field(description="The agent whose session it is.")
    task: Annotated[str, StringConstraints(max_length=4000)] = Field(
        default="", description="What the session is for: the context pack is searched for it.")


class SessionCheckpointedPayload(_Payload):
    """Mid-session: memories the agent asks to keep, each written as a memory."""

    session_id: Identifier
    agent_id: Identifier
    memories: list[SessionMemory] = Field(min_length=1, max_length=MAX_SESSION_MEMORIES)


class SessionSleptPayload(_Payload):
    """The session ends: its summary and next steps become the agent's handoff memory."""

    PROSE = frozenset({"summary"})

    session_id: Identifier
    agent_id: Identifier
    summary: Annotated[str, StringConstraints(min_length=1, max_length=8000)]
    next_steps: list[Annotated[str, StringConstraints(min_length=1, max_length=2000)]] = Field(
        default_factory=list, max_length=MAX_NEXT_STEPS)


class SessionWoke(_EnvelopeFields):
    type: Literal["session.woke"]
    payload: SessionWokePayload


class SessionCheckpointed(_EnvelopeFields):
    type: Literal["session.checkpointed"]
    payload: SessionCheckpointedPayload


class SessionSlept(_EnvelopeFields):
    type: Literal["session.slept"]
    payload: SessionSleptPayload


MAX_DOCUMENT_CHARS = 48_000
ContentType = Literal["markdown", "text"]
def _no_dot_parts(doc_id: str) -> str:
    if any(part in (".", "..") for part in doc_id.split("/")):
        raise ValueError("a doc_id has no . or .. part")
    return doc_id


# A document's path-like name (`guide/install.md`): parts joined by `/`, none empty, `.` or
# `..`.
DocumentId = Annotated[str, StringConstraints(
    max_length=300, pattern=r"^[^/\x00-\x1f]+(/[^/\x00-\x1f]+)*$"),
    AfterValidator(_no_dot_parts)]


class DocUpsertPayload(_Payload):
    """A document to index (a new one, or a new version of one): chunked, and each chunk
    that changed embedded (docs/documents.md)."""

    PROSE = frozenset({"text", "title"})

    doc_id: DocumentId = Field(description="Its path-like name, e.g. guide/install.md.")
    title: Annotated[str, StringConstraints(max_length=200)] | None = None
    text: Annotated[str, StringConstraints(min_length=1, max_length=MAX_DOCUMENT_CHARS)]
    content_type: ContentType = "markdown"
    repo: Repo | None = Field(default=None,
                              description="The repository the document belongs to.")
    security_scope: SecurityScope | None = None


class DocDeletePayload(_Payload):
    """The document leaves the index; Postgres keeps it, marked deleted, with its history."""

    doc_id: DocumentId


class DocUpsert(_EnvelopeFields):
    type: Literal["doc.upsert"]
    payload: DocUpsertPayload


class DocDelete(_EnvelopeFields):
    type: Literal["doc.delete"]
    payload: DocDeletePayload



class PlanningItemUpsertedPayload(_Payload):
    """A work item as read from the repository's planning (its issues.jsonl): every field
    Beads wrote, as written."""

    repo: Repo = Field(description="The repository, as MEMSTREAM_PLANNING_REPOS names its "
                      "checkout: the key of planning.events.")
    item_id: ItemId
    item: dict[str, Any] = Field(description="The item's line as an object, bd's fields as "
                                 "bd wrote them (id, title, status, priority, ...).")

    @model_validator(mode="after")
    def _item_is_a_work_item(self) -> PlanningItemUpsertedPayload:
        if self.item.get("id") != self.item_id:
            raise ValueError("item.id must be the item_id")
        if not isinstance(self.item.get("title"), str) or not self.item["title"]:
            raise ValueError("item.title must be a non-empty string")
        return self


class PlanningClaimedPayload(_Payload):
    """A run took the item: in progress, assigned to the run's agent."""

    repo: Repo = Field(description="The repository, as MEMSTREAM_PLANNING_REPOS names its "
                      "checkout: the key of planning.events.")
    item_id: ItemId
    run_id: Identifier
    assignee: Annotated[str, StringConstraints(min_length=1, max_length=200)]


class PlanningClosedPayload(_Payload):
    """The run that claimed the item finished: `closed` (it succeeded, `reason` says how) or
    `released` (it failed or was cancelled: open again, unassigned, `reason` in its notes)."""

    PROSE = frozenset({"reason"})

    repo: Repo = Field(description="The repository, as MEMSTREAM_PLANNING_REPOS names its "
                      "checkout: the key of planning.events.")
    item_id: ItemId
    run_id: Identifier
    outcome: Literal["closed", "released"]
    reason: Annotated[str, StringConstraints(min_length=1, max_length=2000)]


class PlanningFollowupDiscoveredPayload(_Payload):
    """A next step of the run, filed as a new item `discovered-from` the run's."""

    PROSE = frozenset({"title", "description"})

    repo: Repo = Field(description="The repository, as MEMSTREAM_PLANNING_REPOS names its "
                      "checkout: the key of planning.events.")
    from_item_id: ItemId
    run_id: Identifier
    title: Annotated[str, StringConstraints(min_length=1, max_length=500)]
    description: Annotated[str, StringConstraints(max_length=8000)] = ""
    created_by: Annotated[str, StringConstraints(min_length=1, max_length=200)]


class PlanningSyncRequestedPayload(_Payload):
    """Write the repo's pending claims, closes and follow-ups into its issues.jsonl, then
    read it back."""

    repo: Repo = Field(description="The repository, as MEMSTREAM_PLANNING_REPOS names its "
                      "checkout: the key of planning.events.")
    requested_by: Annotated[str, StringConstraints(min_length=1, max_length=200)]


class PlanningItemUpserted(_EnvelopeFields):
    type: Literal["planning.item_upserted"]
    payload: PlanningItemUpsertedPayload


class PlanningClaimed(_EnvelopeFields):
    type: Literal["planning.claimed"]
    payload: PlanningClaimedPayload


class PlanningClosed(_EnvelopeFields):
    type: Literal["planning.closed"]
    payload: PlanningClosedPayload


class PlanningFollowupDiscovered(_EnvelopeFields):
    type: Literal["planning.followup_discovered"]
    payload: PlanningFollowupDiscoveredPayload


class PlanningSyncRequested(_EnvelopeFields):
    type: Literal["planning.sync_requested"]
    payload: PlanningSyncRequestedPayload


RunEvent = RunStarted | RunStep | RunArtifact | RunFinished
# Events that change a stored memory, named by its record_id.
LifecycleEvent = MemoryUpdate | MemoryDeprecate | MemoryReview | MemoryRestore
MemoryEvent = MemoryWrite | LifecycleEvent | MemoryBlock | MemoryRate | MemoryScoring
SessionEvent = SessionWoke | SessionCheckpointed | SessionSlept
DocumentEvent = DocUpsert | DocDelete
# What a run does to its planning item, written back to the repository by a sync.
PlanningWriteBack = PlanningClaimed | PlanningClosed | PlanningFollowupDiscovered
PlanningEvent = PlanningItemUpserted | PlanningWriteBack | PlanningSyncRequested

# The event types accepted on each input topic: anything else is an unknown type.
RUN_EVENT_TYPES: dict[str, type[RunEvent]] = {
    "run.started": RunStarted,
    "run.step": RunStep,
    "run.artifact": RunArtifact,
    "run.finished": RunFinished,
}
LIFECYCLE_EVENT_TYPES: dict[str, type[LifecycleEvent]] = {
    "memory.update": MemoryUpdate,
    "memory.deprecate": MemoryDeprecate,
    "memory.review": MemoryReview,
    "memory.restore": MemoryRestore,
}
MEMORY_EVENT_TYPES: dict[str, type[MemoryEvent]] = {
    "memory.write": MemoryWrite, **LIFECYCLE_EVENT_TYPES, "memory.block": MemoryBlock,
    "memory.rate": MemoryRate, "memory.scoring": MemoryScoring,
}
CONSOLIDATE_EVENT_TYPES: dict[str, type[ConsolidateRequest]] = {
    "memory.consolidate": ConsolidateRequest,
}
SESSION_EVENT_TYPES: dict[str, type[SessionEvent]] = {
    "session.woke": SessionWoke,
    "session.checkpointed": SessionCheckpointed,
    "session.slept": SessionSlept,
}
DOCUMENT_EVENT_TYPES: dict[str, type[DocumentEvent]] = {
    "doc.upsert": DocUpsert,
    "doc.delete": DocDelete,
}
PLANNING_EVENT_TYPES: dict[str, type[PlanningEvent]] = {
    "planning.item_upserted": PlanningItemUpserted,
    "planning.claimed": PlanningClaimed,
    "planning.closed": PlanningClosed,
    "planning.followup_discovered": PlanningFollowupDiscovered,
    "planning.sync_requested": PlanningSyncRequested,
}
EVENT_TYPES: dict[str, type[RunEvent | MemoryEvent | ConsolidateRequest | SessionEvent
                            | DocumentEvent | PlanningEvent]] = {
    **RUN_EVENT_TYPES, **MEMORY_EVENT_TYPES, **CONSOLIDATE_EVENT_TYPES, **SESSION_EVENT_TYPES,
    **DOCUMENT_EVENT_TYPES, **PLANNING_EVENT_TYPES,
}

ChangeKind = Literal[
    "created", "updated", "merged", "superseded", "deprecated", "approved", "rejected",
    "restored", "proposed", "promoted", "expired", "refused", "invalidated",
]
RecordKind = Literal["run_digest", "memory", "fix_pattern", "doc_chunk"]


class Provenance(_Strict):
    source_event_id: str
    source_topic: str
    source_partition: int
    source_offset: int
    producer: str


class MemoryUpdated(_Strict):
    """Announced on `memory.updated`, keyed by record id, once a record is searchable."""

    event_id: str = Field(description="Deterministic: the same change always has the same id.")
    type: Literal["memory.updated"] = "memory.updated"
    schema_version: Literal[1] = SCHEMA_VERSION
    change: ChangeKind
    record_id: str
    record_kind: RecordKind
    namespace: str
    version: int
    occurred_at: datetime
    provenance: Provenance
    cause_event_id: str | None = Field(
        default=None, description="The lifecycle event (update, deprecate, review, restore) "
        "that made the change; for `proposed` and a rejected diff, the pending diff's id."
    )
    reason: str | None = Field(
        default=None, description="Why, where the change has a reason: a refused write's rule, "
        "a deprecation's reason, a promotion's rule."
    )
