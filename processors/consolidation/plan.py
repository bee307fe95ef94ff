"""A consolidation run as a pure plan: which live memories merge into which replacements.

The consolidator (streams/stages/consolidation/consolidator.py) loads a namespace's live memories
and vectors, asks `plan_consolidation` what to do, and carries the plan out in one Postgres
transaction. The same memories give the same plan (ids and texts included), so a re-run of a request
that was already carried out finds every replacement in place and changes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from memstream_client.events import Provenance, ReviewState
from memstream_client.links import wiki_links
from processors.consolidation.candidates import ConsolidationCandidate, ConsolidationSettings
from processors.consolidation.clusters import (
    MergedMemory,
    find_clusters,
    merge_cluster,
    pending_supersessions,
)
from processors.memory.tiers import merged_tier
from schemas.records import Record

# How memories the system derives (merges) are stored: drafts for a reviewer, or approved.
DerivedReview = Literal["draft", "approved"]


@dataclass(frozen=True)
class ConsolidationPlan:
    memories: int
    merges: list[MergedMemory]
    # Live records that an earlier, interrupted run already merged: record id -> its merge.
    interrupted: dict[str, str]
    timings: dict[str, float] = field(default_factory=dict)
    # Draft merges and their members, left alone until a reviewer decides.
    awaiting_review: frozenset[str] = frozenset()

    @property
    def superseded(self) -> dict[str, str]:
        """Every record this plan supersedes -> the record that replaces it."""
        replaced = {member: merge.record_id for merge in self.merges
                    for member in merge.member_ids}
        return {**self.interrupted, **replaced}


def candidate_of(record: Record) -> ConsolidationCandidate:
    """How consolidation sees a stored memory. A merge's sources are the records it replaced
    and their sources, so that `pending_supersessions` can tell an interrupted run."""
    merged_from = tuple(record.body.get("merged_from", ()))
    sources = merged_from + tuple(record.body.get("source_event_ids", ())) if merged_from \
        else (record.provenance.source_event_id,)
    return ConsolidationCandidate(
        record_id=record.record_id, namespace=record.namespace, scope=record.scope,
        agent_id=record.agent_id, record_kind=record.record_kind,
        memory_type=record.memory_type, text=record.text, title=record.title,
        tags=record.tags, related_ids=record.related_ids, review_state=record.review_state,
        source_event_ids=sources, created_at=record.created_at, source_ref=record.source_ref,
        repo=record.repo, security_scope=record.security_scope,
    )


def awaiting_review(records: Sequence[Record]) -> frozenset[str]:
    """The draft merges among live records, and their live members: a merge that is a draft
    hides nothing (its members stay live until it is approved), and neither is clustered
    again while a reviewer has not decided."""
    live = {record.record_id for record in records}
    waiting: set[str] = set()
    for record in records:
        merged_from = record.body.get("merged_from")
        if merged_from and record.review_state == "draft":
            waiting.add(record.record_id)
            waiting.update(live.intersection(merged_from))
    return frozenset(waiting)


def plan_consolidation(records: Sequence[Record], vectors: npt.ArrayLike,
                       settings: ConsolidationSettings | None = None, *,
                       rejected: Collection[str] = ()) -> ConsolidationPlan:
    """Cluster the live memories of one namespace and merge each cluster. `rejected`: the
    ids of merges a reviewer rejected, which are not proposed again."""
    matrix = np.asarray(vectors, dtype=np.float32)
    candidates = [candidate_of(record) for record in records]
    waiting = awaiting_review(records)
    interrupted = pending_supersessions(
        [candidate for candidate in candidates if candidate.record_id not in waiting])
    rows = [row for row, candidate in enumerate(candidates)
            if candidate.record_id not in interrupted and candidate.record_id not in waiting]
    timings: dict[str, float] = {}
    clusters = find_clusters([candidates[row] for row in rows], matrix[rows], settings,
                             timings=timings)
    started = time.perf_counter()
    merges = [merge_cluster([candidates[rows[i]] for i in cluster],
                            matrix[[rows[i] for i in cluster]], settings)
              for cluster in clusters]
    merges = [merge for merge in merges if merge.record_id not in rejected]
    timings["merge"] = time.perf_counter() - started
    return ConsolidationPlan(len(records), merges, interrupted, timings, waiting)


def merged_review_state(merge: MergedMemory, members: Sequence[Record],
                        policy: DerivedReview) -> ReviewState:
    """A merge is the system's claim that its members say one thing: a draft for a reviewer
    to approve, unless the policy approves derived memories or the members are restatements
    of one text (the same words, whatever the case, spacing and final punctuation)."""
    if policy == "approved" or len({_restated(member.text) for member in members}) == 1:
        return merge.review_state
    return "draft"


def _restated(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip(".!?;: ")


def merged_record(merge: MergedMemory, members: Sequence[Record], provenance: Provenance,
                  *, rewritten: str | None = None, policy: DerivedReview = "draft") -> Record:
    """The replacement as a stored memory: derived by the consolidation request that
    `provenance` names, kept as long as its longest-lived member, reviewed as `policy` and
    `merged_review_state` say. `rewritten`: the optional LLM hook's text in place of the
    deterministic merge (which the body keeps)."""
    expiries = [member.expires_at for member in members]
    text = rewritten or merge.text
    return Record(
        record_id=merge.record_id,
        namespace=merge.namespace,
        record_kind=merge.record_kind,
        scope=merge.scope,
        agent_id=merge.agent_id,
        repo=merge.repo,
        security_scope=merge.security_scope,
        title=merge.title,
        text=text,
        body={
            "merged_from": list(merge.member_ids),
            "medoid_id": merge.medoid_id,
            "source_event_ids": list(merge.source_event_ids),
            # Every member's speaker or agent, source_ref and time: nothing of who said what
            # is lost in the merge, and search shows the source refs (streams/api/rendering.py).
            "members": [attribution.as_json() for attribution in merge.attributions],
            "member_source_refs": list(merge.member_source_refs),
            "wiki_links": wiki_links(text),
            **({"deterministic_text": merge.text} if rewritten else {}),
        },
        memory_type=merge.memory_type,
        tags=merge.tags,
        related_ids=merge.related_ids,
        tier=merged_tier(member.tier for member in members),
        review_state=merged_review_state(merge, members, policy),
        trust_class="derived",
        provenance=provenance,
        created_at=merge.created_at,
        expires_at=None if None in expiries else max(e for e in expiries if e is not None),
    )


def report_clusters(plan: ConsolidationPlan) -> list[dict[str, Any]]:
    """The report's view of each merge: the new id, its members, the medoid, the size."""
    return [{"new_id": merge.record_id, "members": list(merge.member_ids),
             "medoid_id": merge.medoid_id, "size": len(merge.member_ids)}
            for merge in plan.merges]
