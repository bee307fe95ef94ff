"""Every route of the HTTP API as a call (docs/http-api.md): each function takes the client's
settings (the namespace a call names when it names none) and the route's parameters, and
returns the `Call` that both clients send, with the model its answer is read into. A client's
method of the same name is this function without its first argument (`client.py`).

A write carries an event id, a new one unless given, so that sending it again (a retry after
a 503 or a lost answer) is the same event, which the worker applies once.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from memstream_client.answers.consolidation import ConsolidationCounts, ConsolidationReports
from memstream_client.answers.documents import Document, DocumentAccepted, DocumentList
from memstream_client.answers.gaps import GapList
from memstream_client.answers.graph import EntityList, EntityPage, MemoryGraph, Neighbourhood
from memstream_client.answers.operations import ApiKey, DeadLetter, DeadLetterList, KeyList, MadeKey
from memstream_client.answers.planning import PlanningContext, PlanningItems, PlanningSyncAccepted
from memstream_client.answers.recall import ContextPack, FixPatterns, MemorySummary, SearchAnswer
from memstream_client.answers.records import (
    Changes,
    CoreBlock,
    RecordBatch,
    RecordDiff,
    RecordHistory,
    RecordLineage,
    RecordList,
    Stats,
)
from memstream_client.answers.review import AgentBlock, PendingDiffs, ReviewQueue
from memstream_client.answers.runs import RunEventAccepted, RunHistory, RunList
from memstream_client.answers.scoring import (
    MemoryScores,
    RatingAccepted,
    ScoringChangeAccepted,
    ScoringHistory,
    ScoringSettings,
)
from memstream_client.answers.sessions import Session, SessionStepAccepted, Woke
from memstream_client.answers.status import Health
from memstream_client.answers.writes import (
    BlockEditAccepted,
    ChangeAccepted,
    MemoryWritten,
    WriteOutcome,
)
from memstream_client.events import (
    MemoryType,
    RecordKind,
    ReviewDecision,
    ReviewState,
    RotationStrategy,
    RunStatus,
    Scope,
    Tier,
    TrustClass,
    WriteScope,
)
from memstream_client.links import linked_text
from memstream_client.sdk._base import Call, QueryValue, body_of, query_of, segment
from memstream_client.sdk.config import Config
from memstream_client.sdk.errors import ConfigError

M = TypeVar("M", bound=BaseModel)
# One value, or several (a parameter that repeats).
Some = str | Sequence[str]
Moment = datetime | str
RunEventType = Literal["run.started", "run.step", "run.artifact", "run.finished"]
# A run that has not finished yet, as the run listing names its status.
RunListStatus = RunStatus | Literal["unfinished"]
ACCEPTED = frozenset({202})
DECIDED_OR_ACCEPTED = frozenset({200, 202})
# How long a write waits for the worker to decide it, unless told otherwise: long enough for
# a worker that keeps up (a write is decided within a second), short enough for an agent's
# turn. 0 answers at once, pending.
DEFAULT_WAIT_S = 5.0
CREATED = frozenset({201})
# /healthz answers an unhealthy worker 503, with the same body.
HEALTH_ANSWERS = frozenset({200, 503})


def namespace_of(config: Config, namespace: str | None) -> str:
    """The namespace a call names, else the client's."""
    found = namespace or config.namespace
    if not found:
        raise ConfigError("no namespace: give namespace=…, set MEMSTREAM_NAMESPACE or "
                          "`namespace` in the config file")
    return found


def get(path: str, model: type[M], **params: QueryValue) -> Call[M]:
    return Call("GET", path, model.model_validate, query_of(**params))


def post(path: str, model: type[M], body: dict[str, Any],
         answered_by: frozenset[int] = ACCEPTED) -> Call[M]:
    return Call("POST", path, model.model_validate, body=body, answered_by=answered_by)


def written(path: str, model: type[M], body: dict[str, Any], wait_s: float) -> Call[M]:
    """A write that waits up to `wait_s` for its outcome: answered 200 once the worker has
    decided it, 202 (`pending`) when it has not yet."""
    return Call("POST", path, model.model_validate, query_of(wait=wait_s), body=body,
                answered_by=DECIDED_OR_ACCEPTED)


def event_id_of(event_id: str | None) -> str:
    return event_id or uuid.uuid4().hex


# Reads.

def search(config: Config, query: str | None = None, *, namespace: str | None = None,
           agent_id: str | None = None, profile: str | None = None,
           run_id: str | None = None, min_score: float | None = None,
           limit: int | None = None, kind: RecordKind | Sequence[RecordKind] | None = None,
           memory_type: MemoryType | Sequence[MemoryType] | None = None,
           tag: Some | None = None, tier: Tier | Sequence[Tier] | None = None,
           review_state: ReviewState | Sequence[ReviewState] | None = None,
           related_id: Some | None = None, since: Moment | None = None,
           until: Moment | None = None, explain: bool = False, repo: Some | None = None,
           security_scope: Some | None = None, as_of: Moment | None = None,
           min_confidence: float | None = None,
           expand: int | None = None) -> Call[SearchAnswer]:
    """Hybrid search of a namespace (`GET /v1/search`): the hits that reach `min_score`
    (0.5), best first, at most `limit` (5). `related_id` (one or several) keeps the records
    that list any of them; without a query it is the search: those that list the most of
    them first, then the newest. `explain`: each hit says how its score was made. `repo`
    (one or several) keeps their records and those of no repo; `security_scope` keeps the
    records labelled with one of them. `as_of`: memory as it stood then; `min_confidence`:
    only records memory is that sure of (by default, each tier's threshold); `expand`:
    hops followed from the best hits along links and shared entities (the `anchor`
    profile follows 2)."""
    return get("/v1/search", SearchAnswer, namespace=namespace_of(config, namespace),
               query=query, agent_id=agent_id, profile=profile, run_id=run_id,
               min_score=min_score, limit=limit, kind=kind, memory_type=memory_type, tag=tag,
               tier=tier, review_state=review_state, related_id=related_id, since=since,
               until=until, explain=flag(explain), repo=repo, security_scope=security_scope,
               as_of=as_of, min_confidence=min_confidence, expand=expand)


def flag(on: bool) -> str | None:
    """A boolean query parameter: given when on, left out (the route's default) when off."""
    return "true" if on else None


def summary(config: Config, query: str, *, namespace: str | None = None,
            agent_id: str | None = None, budget_tokens: int | None = None,
            run_id: str | None = None, profile: str | None = None,
            min_score: float | None = None, limit: int | None = None,
            kind: RecordKind | Sequence[RecordKind] | None = None,
            memory_type: MemoryType | Sequence[MemoryType] | None = None,
            tag: Some | None = None, tier: Tier | Sequence[Tier] | None = None,
            review_state: ReviewState | Sequence[ReviewState] | None = None,
            related_id: str | None = None, since: Moment | None = None,
            until: Moment | None = None, repo: Some | None = None,
            security_scope: Some | None = None, as_of: Moment | None = None,
            min_confidence: float | None = None,
            expand: int | None = None) -> Call[MemorySummary]:
    """What memory holds about `query`, in `budget_tokens` (400) (`GET /v1/summary`): the
    hits of the same search as `search` condensed, each memory cited by its id (rewritten by
    the worker's LLM hook when one is configured). One search of `run_id`'s budget."""
    return get("/v1/summary", MemorySummary, namespace=namespace_of(config, namespace),
               query=query, agent_id=agent_id, budget_tokens=budget_tokens, run_id=run_id,
               profile=profile, min_score=min_score, limit=limit, kind=kind,
               memory_type=memory_type, tag=tag, tier=tier, review_state=review_state,
               related_id=related_id, since=since, until=until, repo=repo,
               security_scope=security_scope, as_of=as_of, min_confidence=min_confidence,
               expand=expand)


def context(config: Config, query: str, *, namespace: str | None = None,
            agent_id: str | None = None, run_id: str | None = None, error: str | None = None,
            budget_tokens: int | None = None, profile: str | None = None,
            min_score: float | None = None,
            kind: RecordKind | Sequence[RecordKind] | None = None,
            memory_type: MemoryType | Sequence[MemoryType] | None = None,
            tag: Some | None = None, tier: Tier | Sequence[Tier] | None = None,
            review_state: ReviewState | Sequence[ReviewState] | None = None,
            related_id: str | None = None, since: Moment | None = None,
            until: Moment | None = None, explain: bool = False, repo: Some | None = None,
            security_scope: Some | None = None,
            shares: Mapping[str, float] | None = None,
            planning_ref: str | None = None, as_of: Moment | None = None,
            min_confidence: float | None = None,
            expand: int | None = None) -> Call[ContextPack]:
    """The context pack for a task (`GET /v1/context`): the agent's core blocks, the
    planning of `planning_ref` (a Beads item of the one `repo` given: the item, its
    blockers, its ready siblings), history (fix patterns of `error`, or of the errors
    `run_id` met; run digests), then long-term memories, in `budget_tokens`. `explain`: each
    item says how its score was made. `repo` and `security_scope` narrow the retrieved
    sections as they narrow `search`. `shares`: each section's share of the budget the core
    blocks leave (`{"documents": 0.4}`; the sections not named keep the server's).
    `as_of`, `min_confidence` and `expand` are `search`'s (`expand` in the long-term
    section)."""
    return get("/v1/context", ContextPack, namespace=namespace_of(config, namespace),
               query=query, agent_id=agent_id, run_id=run_id, error=error,
               budget_tokens=budget_tokens, profile=profile, min_score=min_score, kind=kind,
               memory_type=memory_type, tag=tag, tier=tier, review_state=review_state,
               related_id=related_id, since=since, until=until, explain=flag(explain),
               repo=repo, security_scope=security_scope,
               shares=",".join(f"{name}={share}" for name, share in shares.items())
               if shares else None, planning_ref=planning_ref, as_of=as_of,
               min_confidence=min_confidence, expand=expand)


def fix_patterns(config: Config, error: str, *, namespace: str | None = None,
                 limit: int | None = None,
                 min_score: float | None = None) -> Call[FixPatterns]:
    """What fixed this error before (`GET /v1/fix-patterns`): its signature, the fix
    pattern of that very signature, then the nearest others."""
    return get("/v1/fix-patterns", FixPatterns, namespace=namespace_of(config, namespace),
               error=error, limit=limit, min_score=min_score)


def record(config: Config, record_id: str, *, namespace: str | None = None,
           as_of: Moment | None = None) -> Call[RecordLineage]:
    """One record, its versions, its lineage and whether it is in force (or what superseded
    it, when) (`GET /v1/records/{record_id}`); `as_of`: also its version then, and whether
    it was in force then."""
    return get(f"/v1/records/{segment(record_id)}", RecordLineage,
               namespace=namespace_of(config, namespace), as_of=as_of)


def records(config: Config, record_ids: Sequence[str], *,
            namespace: str | None = None) -> Call[RecordBatch]:
    """Records by their ids in one call (`GET /v1/records?id=…`, at most 100): in the order
    asked, and under `not_found` the ids of none the key may read."""
    return get("/v1/records", RecordBatch, namespace=namespace_of(config, namespace),
               id=_listed(record_ids))


def list_records(config: Config, *, namespace: str | None = None,
                 agent_id: str | None = None, agent: str | None = None,
                 kind: RecordKind | Sequence[RecordKind] | None = None,
                 memory_type: MemoryType | Sequence[MemoryType] | None = None,
                 tier: Tier | Sequence[Tier] | None = None,
                 scope: Scope | Sequence[Scope] | None = None,
                 review_state: ReviewState | Sequence[ReviewState] | None = None,
                 cursor: str | None = None, limit: int | None = None) -> Call[RecordList]:
    """The records the key may read, newest first, a page at a time (`GET /v1/records`):
    each its id, title and a one-line description; `agent` keeps those of one agent, and
    `next` is the `cursor` of the page after."""
    return get("/v1/records", RecordList, namespace=namespace_of(config, namespace),
               agent_id=agent_id, agent=agent, kind=kind, memory_type=memory_type, tier=tier,
               scope=scope, review_state=review_state, cursor=cursor, limit=limit)


def record_history(config: Config, record_id: str, *,
                   namespace: str | None = None) -> Call[RecordHistory]:
    """Every version of a record: what changed, who, why (`…/history`)."""
    return get(f"/v1/records/{segment(record_id)}/history", RecordHistory,
               namespace=namespace_of(config, namespace))


def record_diff(config: Config, record_id: str, *, namespace: str | None = None,
                from_version: int | None = None,
                to_version: int | None = None) -> Call[RecordDiff]:
    """What changed between two versions (`…/diff`; by default the current and the one
    before)."""
    return get(f"/v1/records/{segment(record_id)}/diff", RecordDiff,
               namespace=namespace_of(config, namespace),
               **{"from": from_version, "to": to_version})


def block(config: Config, label: str, *, namespace: str | None = None,
          agent_id: str | None = None) -> Call[CoreBlock]:
    """An agent's core memory block (`GET /v1/blocks/{label}`; the key's agent unless
    `agent_id` names one)."""
    return get(f"/v1/blocks/{segment(label)}", CoreBlock,
               namespace=namespace_of(config, namespace), agent_id=agent_id)


def pending_diffs(config: Config, *, namespace: str | None = None,
                  agent_id: str | None = None, record_id: str | None = None,
                  limit: int | None = None) -> Call[PendingDiffs]:
    """Changes proposed to protected records and blocks, oldest first."""
    return get("/v1/pending-diffs", PendingDiffs, namespace=namespace_of(config, namespace),
               agent_id=agent_id, record_id=record_id, limit=limit)


def review_queue(config: Config, *, namespace: str | None = None,
                 agent_id: str | None = None, record_id: str | None = None,
                 limit: int | None = None) -> Call[ReviewQueue]:
    """Everything waiting for a reviewer (pending diffs, draft merges), oldest first; each
    item's `review` holds the bodies that decide it."""
    return get("/v1/review-queue", ReviewQueue, namespace=namespace_of(config, namespace),
               agent_id=agent_id, record_id=record_id, limit=limit)


def stats(config: Config, *, namespace: str | None = None) -> Call[Stats]:
    """Live records by kind, and points in the index."""
    return get("/v1/stats", Stats, namespace=namespace_of(config, namespace))


def changes(config: Config, *, namespace: str | None = None, after: str | None = None,
            since: Moment | None = None, agent_id: str | None = None,
            limit: int | None = None) -> Call[Changes]:
    """Record versions in the order they were made, after the cursor `after` (or from
    `since`); `next` resumes after the last."""
    return get("/v1/changes", Changes, namespace=namespace_of(config, namespace),
               after=after, since=since, agent_id=agent_id, limit=limit)


def graph(config: Config, *, namespace: str | None = None, agent_id: str | None = None,
          limit: int | None = None, as_of: Moment | None = None,
          entities: bool = False) -> Call[MemoryGraph]:
    """The memory graph: live memories and the links between them; `as_of`: those in force
    then; `entities`: with the entities two or more of them mention."""
    return get("/v1/graph", MemoryGraph, namespace=namespace_of(config, namespace),
               agent_id=agent_id, limit=limit, as_of=as_of, entities=flag(entities))


def neighbours(config: Config, start: str, *, depth: int | None = None,
               namespace: str | None = None, agent_id: str | None = None,
               as_of: Moment | None = None) -> Call[Neighbourhood]:
    """The records and entities around a record or an entity (`entity:` and its name),
    `depth` hops out (1 to 3; 1 by default) along related ids, wiki-links and shared
    entities (`GET /v1/graph/neighbours`); `as_of`: among the records in force then."""
    return get("/v1/graph/neighbours", Neighbourhood, namespace=namespace_of(config, namespace),
               agent_id=agent_id, depth=depth, as_of=as_of, **{"from": start})


def entities(config: Config, *, namespace: str | None = None, agent_id: str | None = None,
             prefix: str | None = None, limit: int | None = None) -> Call[EntityList]:
    """The entities the namespace's records mention, the most mentioned first
    (`GET /v1/entities`); `prefix` keeps those whose name starts so."""
    return get("/v1/entities", EntityList, namespace=namespace_of(config, namespace),
               agent_id=agent_id, prefix=prefix, limit=limit)


def entity(config: Config, name: str, *, namespace: str | None = None,
           agent_id: str | None = None) -> Call[EntityPage]:
    """An entity by its name or key (`GET /v1/entities/{key}`): its relations (stated, and
    co-mentions) with their evidence and confidence, and the latest records that mention
    it."""
    return get(f"/v1/entities/{segment(name)}", EntityPage,
               namespace=namespace_of(config, namespace), agent_id=agent_id)


def consolidation_counts(config: Config, *,
                         namespace: str | None = None) -> Call[ConsolidationCounts]:
    """What the consolidation trigger sees of a namespace."""
    return get("/v1/consolidation/counts", ConsolidationCounts,
               namespace=namespace_of(config, namespace))


def consolidation_reports(config: Config, *, namespace: str | None = None,
                          limit: int | None = None) -> Call[ConsolidationReports]:
    """Maintenance reports, newest first, with what names the records they list."""
    return get("/v1/consolidation/reports", ConsolidationReports,
               namespace=namespace_of(config, namespace), limit=limit)


def runs(config: Config, *, namespace: str | None = None,
         status: RunListStatus | Sequence[RunListStatus] | None = None,
         agent: str | None = None, since: Moment | None = None,
         limit: int | None = None) -> Call[RunList]:
    """The namespace's runs, newest first."""
    return get("/v1/runs", RunList, namespace=namespace_of(config, namespace), status=status,
               agent=agent, since=since, limit=limit)


def run(config: Config, run_id: str, *, namespace: str | None = None) -> Call[RunHistory]:
    """One run: its ledger, digest, the errors it met with their fix patterns, and the fix
    patterns it fixed."""
    return get(f"/v1/runs/{segment(run_id)}", RunHistory,
               namespace=namespace_of(config, namespace))


def dead_letters(config: Config, *, namespace: str | None = None,
                 all_namespaces: bool = False,
                 reason: Some | None = None,
                 error_class: Some | None = None, topic: Some | None = None,
                 since: Moment | None = None, before: str | None = None,
                 limit: int | None = None) -> Call[DeadLetterList]:
    """Events no stage could use, newest first (an admin key bound to no agent): the
    namespace's, or the key's when none is set, or with `all_namespaces` (an operator's
    key) every namespace's and those of none."""
    return get("/v1/dead-letters", DeadLetterList,
               namespace=None if all_namespaces else namespace or config.namespace,
               reason=reason, error_class=error_class, topic=topic, since=since,
               before=before, limit=limit)


def dead_letter(config: Config, dead_letter_id: str) -> Call[DeadLetter]:
    """One dead letter."""
    return get(f"/v1/dead-letters/{segment(dead_letter_id)}", DeadLetter)


def keys(config: Config, *, namespace: str | None = None,
         all_namespaces: bool = False) -> Call[KeyList]:
    """The namespace's keys (never their tokens), or every namespace's (an operator's
    key)."""
    return get("/v1/keys", KeyList,
               namespace=None if all_namespaces else namespace_of(config, namespace))


def key(config: Config, key_id: str) -> Call[ApiKey]:
    """One key."""
    return get(f"/v1/keys/{segment(key_id)}", ApiKey)


def health(config: Config) -> Call[Health]:
    """Whether the worker can serve (`GET /healthz`, public), healthy or not."""
    return Call("GET", "/healthz", Health.model_validate, answered_by=HEALTH_ANSWERS)


def openapi(config: Config) -> Call[dict[str, Any]]:
    """The OpenAPI 3.1 document of the HTTP API (`GET /v1/openapi.json`, public), from
    which a client in another language can be generated (docs/http-api.md)."""
    return Call("GET", "/v1/openapi.json", dict)


# Keys: made by an admin, answered at once.

def create_key(config: Config, permissions: str | Sequence[str], *,
               namespace: str | None = None, all_namespaces: bool = False,
               agent_id: str | None = None, label: str = "") -> Call[MadeKey]:
    """Make a key (`read`, `write`, `review`, `admin`) for the namespace, or every one (an
    operator's key), bound to `agent_id` if given; its token is in this answer only."""
    # Made twice if sent twice: sent again only if it never reached the worker.
    return Call("POST", "/v1/keys", MadeKey.model_validate, body=body_of(
        namespace=None if all_namespaces else namespace_of(config, namespace),
        permissions=permissions if isinstance(permissions, str) else list(permissions),
        agent_id=agent_id, label=label), answered_by=CREATED, repeatable=False)


def revoke_key(config: Config, key_id: str) -> Call[ApiKey]:
    """Revoke a key: it stops working at once, on every worker."""
    return Call("DELETE", f"/v1/keys/{segment(key_id)}", ApiKey.model_validate)


# Writes: published to Kafka and answered 202, applied by the worker after.

def write_memory(config: Config, text: str, *, namespace: str | None = None,
                 title: str | None = None, memory_type: MemoryType | None = None,
                 tags: Sequence[str] | None = None, related_ids: Sequence[str] | None = None,
                 scope: WriteScope | None = None, agent_id: str | None = None,
                 tier: Tier | None = None, review_state: ReviewState | None = None,
                 trust_class: TrustClass | None = None, source_ref: str | None = None,
                 thread: str | None = None, expires_at: datetime | None = None,
                 links: Sequence[str] = (), repo: str | None = None,
                 security_scope: str | None = None, event_id: str | None = None,
                 wait_s: float = DEFAULT_WAIT_S) -> Call[MemoryWritten]:
    """Write a memory (a `memory.write`), waiting up to `wait_s` for what became of it:
    `stored` (`record_id`), `restated` (`record_id` names the live memory it says again),
    `refused` or `dead_lettered` (`reason`), or still `pending` (read it later with
    `write_outcome(event_id)`).
    `links` (titles or record ids of other memories) close its text as `[[wiki links]]`,
    which the graph and the browser follow (ValueError for one that cannot be a link).
    `scope`: shared or team (the namespace), personal or user (the agent's vault), project
    (the namespace within `repo`)."""
    return written("/v1/memories", MemoryWritten, body_of(
        namespace=namespace_of(config, namespace), event_id=event_id_of(event_id),
        text=linked_text(text, links),
        title=title, memory_type=memory_type, tags=_listed(tags),
        related_ids=_listed(related_ids), scope=scope, agent_id=agent_id, tier=tier,
        review_state=review_state, trust_class=trust_class, source_ref=source_ref,
        thread=thread, expires_at=expires_at, repo=repo, security_scope=security_scope),
        wait_s)


def update_memory(config: Config, record_id: str, *, expected_version: int,
                  namespace: str | None = None, text: str | None = None,
                  title: str | None = None, memory_type: MemoryType | None = None,
                  tags: Sequence[str] | None = None, related_ids: Sequence[str] | None = None,
                  event_id: str | None = None,
                  wait_s: float = DEFAULT_WAIT_S) -> Call[ChangeAccepted]:
    """Change the fields given of the version the caller saw (a `memory.update`), waiting up
    to `wait_s` for its outcome; a protected record's update is `proposed`: it waits for
    review, as the pending diff named by the event id."""
    return written(f"/v1/memories/{segment(record_id)}/update", ChangeAccepted, body_of(
        namespace=namespace_of(config, namespace), event_id=event_id_of(event_id),
        expected_version=expected_version, text=text, title=title, memory_type=memory_type,
        tags=_listed(tags), related_ids=_listed(related_ids)), wait_s)


def deprecate_memory(config: Config, record_id: str, *, reason: str,
                     namespace: str | None = None, expected_version: int | None = None,
                     event_id: str | None = None,
                     wait_s: float = DEFAULT_WAIT_S) -> Call[ChangeAccepted]:
    """Deprecate a memory, saying why (a `memory.deprecate`), waiting up to `wait_s` for its
    outcome."""
    return written(f"/v1/memories/{segment(record_id)}/deprecate", ChangeAccepted, body_of(
        namespace=namespace_of(config, namespace), event_id=event_id_of(event_id),
        reason=reason, expected_version=expected_version), wait_s)


def restore_memory(config: Config, record_id: str, *, version: int,
                   namespace: str | None = None, expected_version: int | None = None,
                   event_id: str | None = None,
                   wait_s: float = DEFAULT_WAIT_S) -> Call[ChangeAccepted]:
    """Bring back the content of `version`, as the memory's next version (a
    `memory.restore`), waiting up to `wait_s` for its outcome."""
    return written(f"/v1/memories/{segment(record_id)}/restore", ChangeAccepted, body_of(
        namespace=namespace_of(config, namespace), event_id=event_id_of(event_id),
        version=version, expected_version=expected_version), wait_s)


def review(config: Config, decision: ReviewDecision, *, namespace: str | None = None,
           record_id: str | None = None, diff_id: str | None = None,
           block: AgentBlock | Mapping[str, str] | None = None, note: str | None = None,
           event_id: str | None = None, wait_s: float = DEFAULT_WAIT_S) -> Call[ChangeAccepted]:
    """Approve or reject a draft record, a record's pending diff (`record_id`, `diff_id`), or
    a block's (`block`: agent_id and label, `diff_id`); the reviewer is the key. A review
    queue item's `review.approve` and `review.reject` name these. Waits up to `wait_s` for
    its outcome."""
    return written("/v1/reviews", ChangeAccepted, body_of(
        namespace=namespace_of(config, namespace), event_id=event_id_of(event_id),
        decision=decision, record_id=record_id, diff_id=diff_id,
        block=_block_body(block), note=note), wait_s)


def edit_block(config: Config, label: str, *, namespace: str | None = None,
               agent_id: str | None = None, set: Mapping[str, str | Sequence[str]] | None = None,
               append: Mapping[str, Sequence[str]] | None = None,
               strategy: RotationStrategy | None = None, expected_version: int | None = None,
               event_id: str | None = None,
               wait_s: float = DEFAULT_WAIT_S) -> Call[BlockEditAccepted]:
    """Edit an agent's core memory block (a `memory.block`; the key's agent unless
    `agent_id` names one): `set` replaces fields, `append` adds items to list fields. Waits
    up to `wait_s` for its outcome (`updated`, or `proposed` for a protected block)."""
    return written(f"/v1/blocks/{segment(label)}", BlockEditAccepted, body_of(
        namespace=namespace_of(config, namespace), event_id=event_id_of(event_id),
        agent_id=agent_id,
        set=None if set is None else {name: value if isinstance(value, str) else list(value)
                                      for name, value in set.items()},
        append=None if append is None else {name: list(items)
                                            for name, items in append.items()},
        strategy=strategy, expected_version=expected_version), wait_s)


def run_event(config: Config, type: RunEventType, payload: Mapping[str, Any], *,
              namespace: str | None = None, occurred_at: Moment | None = None,
              event_id: str | None = None) -> Call[RunEventAccepted]:
    """Add an event to a run's ledger (`run.started`, `run.step`, `run.artifact`,
    `run.finished`; the payload names its `run_id`)."""
    return post("/v1/runs/events", RunEventAccepted, body_of(
        type=type, namespace=namespace_of(config, namespace), event_id=event_id_of(event_id),
        payload=dict(payload), occurred_at=occurred_at))


def wake(config: Config, task: str = "", *, namespace: str | None = None,
         agent_id: str | None = None, session_id: str | None = None,
         budget_tokens: int | None = None, event_id: str | None = None) -> Call[Woke]:
    """Start a session on `task` (a `session.woke`; the key's agent unless `agent_id` names
    one): answers its last handoff and the context pack for the task, the agent's core
    blocks first. The session id is a new one unless given."""
    return post("/v1/sessions/wake", Woke, body_of(
        namespace=namespace_of(config, namespace), event_id=event_id_of(event_id), task=task,
        agent_id=agent_id, session_id=session_id, budget_tokens=budget_tokens))


def checkpoint(config: Config, session_id: str, memories: Sequence[Mapping[str, Any]], *,
               namespace: str | None = None, agent_id: str | None = None,
               event_id: str | None = None,
               wait_s: float = DEFAULT_WAIT_S) -> Call[SessionStepAccepted]:
    """Keep memories mid-session (a `session.checkpointed`): each `{text, title?,
    memory_type?, tags?, scope?}`, personal to the session's agent unless `scope` is
    `shared`; waits up to `wait_s` for what became of each (`writes`), and names the
    records that hold them (`record_ids`)."""
    return written(f"/v1/sessions/{segment(session_id)}/checkpoint", SessionStepAccepted,
                   body_of(namespace=namespace_of(config, namespace),
                           event_id=event_id_of(event_id), agent_id=agent_id,
                           memories=[dict(memory) for memory in memories]), wait_s)


def sleep(config: Config, session_id: str, summary: str, *,
          next_steps: Sequence[str] | None = None, namespace: str | None = None,
          agent_id: str | None = None, event_id: str | None = None,
          wait_s: float = DEFAULT_WAIT_S) -> Call[SessionStepAccepted]:
    """End a session (a `session.slept`): its summary and next steps become the handoff
    memory the agent's next wake returns; waits up to `wait_s` for what became of it and
    names the record that holds it (`handoff_record_id`)."""
    return written(f"/v1/sessions/{segment(session_id)}/sleep", SessionStepAccepted, body_of(
        namespace=namespace_of(config, namespace), event_id=event_id_of(event_id),
        agent_id=agent_id, summary=summary, next_steps=_listed(next_steps)), wait_s)


def write_outcome(config: Config, event_id: str, *, namespace: str | None = None,
                  wait_s: float = 0.0) -> Call[WriteOutcome]:
    """What became of the write `event_id` (`GET /v1/writes/{event_id}`), waiting up to
    `wait_s` for it to be decided: stored, restated, changed, proposed, refused,
    dead-lettered, or still pending."""
    return get(f"/v1/writes/{segment(event_id)}", WriteOutcome,
               namespace=namespace_of(config, namespace), wait=wait_s or None)


def session(config: Config, session_id: str, *,
            namespace: str | None = None) -> Call[Session]:
    """A session's ledger (`GET /v1/sessions/{session_id}`): its events, its state, and the
    record id of its handoff once it slept."""
    return get(f"/v1/sessions/{segment(session_id)}", Session,
               namespace=namespace_of(config, namespace))


def rate_memories(config: Config, ratings: Mapping[str, bool] | Sequence[Mapping[str, Any]],
                  *, gap: str | None = None, gap_query: str | None = None,
                  namespace: str | None = None, agent_id: str | None = None,
                  event_id: str | None = None) -> Call[RatingAccepted]:
    """Rate memories you were given (a `memory.rate`): `{memory_id: useful}`, or a list of
    `{memory_id, useful}` (1 to 50), as the key's agent (`agent_id`: an admin key names
    one); `gap` says what you needed and memory did not hold, `gap_query` what you searched
    for it. A memory that does not exist or that the agent may not read: NotFound."""
    rated = [{"memory_id": memory_id, "useful": useful}
             for memory_id, useful in ratings.items()] if isinstance(ratings, Mapping) \
        else [dict(rating) for rating in ratings]
    return post("/v1/ratings", RatingAccepted, body_of(
        namespace=namespace_of(config, namespace), event_id=event_id_of(event_id),
        agent_id=agent_id, ratings=rated, gap=gap, gap_query=gap_query))


def memory_scores(config: Config, memory_id: str, *, namespace: str | None = None,
                  agent_id: str | None = None) -> Call[MemoryScores]:
    """What the adaptive score of one memory for the key's agent is made of
    (`GET /v1/memory-scores`): its ratings and accesses counted, when last, and its latest
    ratings."""
    return get("/v1/memory-scores", MemoryScores, namespace=namespace_of(config, namespace),
               memory_id=memory_id, agent_id=agent_id)


def scoring_config(config: Config, *,
                   namespace: str | None = None) -> Call[ScoringSettings]:
    """The adaptive scoring config in effect (`GET /v1/memory-scoring/config`): its version,
    who changed it last and when, and each parameter with its value, default and range."""
    return get("/v1/memory-scoring/config", ScoringSettings,
               namespace=namespace_of(config, namespace))


def scoring_config_history(config: Config, *, namespace: str | None = None,
                           limit: int | None = None) -> Call[ScoringHistory]:
    """The versions of the adaptive scoring config, newest first (20, at most 200): what
    each changed, who, when."""
    return get("/v1/memory-scoring/config/history", ScoringHistory,
               namespace=namespace_of(config, namespace), limit=limit)


def set_scoring_config(config: Config, changes: Mapping[str, int | float], *,
                       namespace: str | None = None, expected_version: int | None = None,
                       event_id: str | None = None) -> Call[ScoringChangeAccepted]:
    """Change parameters of the adaptive scoring (a `memory.scoring`; an admin key):
    `{name: value}`, the others kept. `expected_version`: the version the change was made on,
    refused if the config moved since. A change the rules refuse (an unknown parameter, a
    value out of range, weights that do not sum to 1): BadRequest, every reason in its
    `body["problems"]`."""
    return Call("PUT", "/v1/memory-scoring/config", ScoringChangeAccepted.model_validate,
                body=body_of(namespace=namespace_of(config, namespace),
                             event_id=event_id_of(event_id), changes=dict(changes),
                             expected_version=expected_version),
                answered_by=ACCEPTED)
def gaps(config: Config, *, status: Literal["open", "resolved", "all"] | None = None,
         namespace: str | None = None, agent_id: str | None = None,
         limit: int | None = None, cursor: str | None = None) -> Call[GapList]:
    """What agents needed and memory did not hold, grouped by question, the most recently
    met first (`GET /v1/gaps`; `status`: open by default): a key bound to an agent sees its
    agent's gaps and those of no agent; an admin key bound to none, every agent's (or the
    one it names); any other key, those of no agent. `cursor`: the `next` of a page."""
    return get("/v1/gaps", GapList, namespace=namespace_of(config, namespace),
               status=status, agent_id=agent_id, limit=limit, cursor=cursor)


def upsert_document(config: Config, doc_id: str, text: str, *, title: str | None = None,
                    content_type: Literal["markdown", "text"] | None = None,
                    repo: str | None = None, security_scope: str | None = None,
                    namespace: str | None = None,
                    event_id: str | None = None) -> Call[DocumentAccepted]:
    """Index a document, or a new version of one (a `doc.upsert`): `doc_id` its path-like
    name (`guide/install.md`), `text` Markdown (by headings) or plain text (by paragraphs);
    only the chunks that changed are embedded again."""
    return post("/v1/documents", DocumentAccepted, body_of(
        namespace=namespace_of(config, namespace), event_id=event_id_of(event_id),
        doc_id=doc_id, text=text, title=title, content_type=content_type, repo=repo,
        security_scope=security_scope))


def delete_document(config: Config, doc_id: str, *, namespace: str | None = None,
                    event_id: str | None = None) -> Call[DocumentAccepted]:
    """Take a document out of the index (a `doc.delete`); Postgres keeps it and its
    history."""
    return post("/v1/documents/delete", DocumentAccepted, body_of(
        namespace=namespace_of(config, namespace), event_id=event_id_of(event_id),
        doc_id=doc_id))


def documents(config: Config, *, repo: str | None = None, include_deleted: bool | None = None,
              namespace: str | None = None) -> Call[DocumentList]:
    """The namespace's documents (`GET /v1/documents`; of one `repo`), by doc id: title,
    repo, chunks, version, when updated, when deleted."""
    return get("/v1/documents", DocumentList, namespace=namespace_of(config, namespace),
               repo=repo, include_deleted=None if include_deleted is None
               else str(include_deleted).lower())


def document(config: Config, doc_id: str, *, namespace: str | None = None) -> Call[Document]:
    """A document (`GET /v1/documents/{doc_id}`): its live chunks in order, each with its
    heading path and token count, and its versions."""
    return get(f"/v1/documents/{segment(doc_id)}", Document,
               namespace=namespace_of(config, namespace))


def _listed(values: Sequence[str] | None) -> list[str] | None:
    """Values as a JSON list; a string is one value, not its characters."""
    if values is None:
        return None
    return [values] if isinstance(values, str) else list(values)


def _block_body(block: AgentBlock | Mapping[str, str] | None) -> dict[str, str] | None:
    if isinstance(block, AgentBlock):
        return {"agent_id": block.agent_id, "label": block.label}
    return None if block is None else dict(block)


def planning_items(config: Config, repo: str, *,
                   namespace: str | None = None) -> Call[PlanningItems]:
    """A repository's Beads work items (`GET /v1/planning/items`), read fresh from its
    issues.jsonl: status, priority, readiness, open blockers."""
    return get("/v1/planning/items", PlanningItems, namespace=namespace_of(config, namespace),
               repo=repo)


def planning_item(config: Config, repo: str, item_id: str, *,
                  namespace: str | None = None) -> Call[PlanningContext]:
    """A work item's planning context (`GET /v1/planning/items/{item_id}`): the item, its
    dependencies and blockers with their state, its ready siblings."""
    return get(f"/v1/planning/items/{segment(item_id)}", PlanningContext,
               namespace=namespace_of(config, namespace), repo=repo)


def plan_sync(config: Config, repo: str, *, namespace: str | None = None,
              event_id: str | None = None) -> Call[PlanningSyncAccepted]:
    """Write the repository's pending claims, closes and follow-ups into its issues.jsonl (a
    `planning.sync_requested`; accepted, not written yet)."""
    return post("/v1/planning/sync", PlanningSyncAccepted, body_of(
        namespace=namespace_of(config, namespace), event_id=event_id_of(event_id), repo=repo))
