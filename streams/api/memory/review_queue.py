"""`GET /v1/review-queue`: everything in a namespace that waits for a reviewer, in one list,
oldest first: the pending diffs of records and core blocks (each as `/v1/pending-diffs` lists
it), the draft merges of consolidation, with their members, and the proposed lessons (the
lessons and patterns derived from runs, still drafts), with what they are learnt from. Each
item says how it is decided: the `POST /v1/reviews` body that approves it and the one that
rejects it, a `memory.review` published to Kafka like every write. What the key may not read
is left out, as in every listing: another agent's personal records, blocks and merges."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from faust.web import Request, Response, View

from processors.api.access import Caller
from processors.api.parameters import IDENTIFIER, integer
from processors.memory.blocks import BlockDiff
from processors.memory.lifecycle import PendingDiff
from stores.record_versions import DraftMerge, ProposedLearningDraft
from stores.records import FoundRecord
from streams.api.auth import granted_namespace, personal_reader
from streams.api.pages import Pages
from streams.api.params import READER_PARAMS, Param, Params, optional, value
from streams.api.rendering import block_diff_answer, diff_answer
from streams.plumbing.json_values import jsonable
from streams.plumbing.runtime import Runtime

# Items listed per request, by default and at most (as for /v1/pending-diffs).
QUEUE_LIMIT = 50
MAX_QUEUE_LIMIT = 500
LIMIT = integer(1, MAX_QUEUE_LIMIT)
QUEUE_PARAMS: Params = {**READER_PARAMS, "record_id": Param(IDENTIFIER), "limit": Param(LIMIT)}
# Where every item of the queue is decided.
REVIEW_ROUTE = "POST /v1/reviews"

ReviewKind = Literal["pending_diff", "draft_merge", "proposed_lesson"]


def wire_review_queue(pages: Pages, runtime: Runtime) -> None:
    stores = runtime.stores

    @pages.page("/v1/review-queue", params=QUEUE_PARAMS)
    async def review_queue_view(web: View, request: Request, caller: Caller) -> Response:
        namespace = granted_namespace(caller, request.query)
        params = request.query
        limit = value(params, "limit", LIMIT, QUEUE_LIMIT)
        record_id = optional(params, "record_id", IDENTIFIER)
        reader = personal_reader(caller, params)
        diffs = await stores.versions.pending_diffs(namespace, record_id, limit, reader)
        # A block's diffs are no record's.
        block_diffs = [] if record_id is not None else \
            await stores.blocks.pending_block_diffs(namespace, limit, reader)
        merges = await stores.versions.draft_merges(namespace, record_id, limit, reader)
        learnings = await stores.versions.proposed_learnings(namespace, record_id, limit,
                                                             reader)
        subjects = await stores.records.records_by_id(
            namespace, sorted({diff.record_id for diff in diffs}))
        return web.json({"namespace": namespace, "items": queue_items(
            namespace, diffs, block_diffs, merges, subjects, learnings)[:limit]})


def queue_items(namespace: str, diffs: Sequence[PendingDiff],
                block_diffs: Sequence[BlockDiff], merges: Sequence[DraftMerge],
                subjects: Mapping[str, FoundRecord],
                learnings: Sequence[ProposedLearningDraft]) -> list[dict[str, Any]]:
    """Every item, oldest first (ties by id). `subjects`: the records the diffs change, whose
    title and text an item shows as they are now (what the diff would change)."""
    items: list[tuple[datetime, str, dict[str, Any]]] = []
    for diff in diffs:
        subject = subjects.get(diff.record_id)
        items.append((diff.proposed_at, diff.diff_id, {
            **_head("pending_diff", diff.diff_id, diff.record_id,
                    subject.title if subject else None, subject.text if subject else None),
            **diff_answer(diff).model_dump(mode="json", by_alias=True, exclude_unset=True),
            "review": review_bodies(namespace, {"record_id": diff.record_id,
                                                "diff_id": diff.diff_id})}))
    for block_diff in block_diffs:
        block = {"agent_id": block_diff.agent_id, "label": block_diff.label}
        items.append((block_diff.proposed_at, block_diff.diff_id, {
            **_head("pending_diff", block_diff.diff_id, None, None, None),
            **block_diff_answer(block_diff).model_dump(mode="json", by_alias=True, exclude_unset=True),
            "review": review_bodies(namespace, {"block": block,
                                                "diff_id": block_diff.diff_id})}))
    for merge in merges:
        items.append((merge.proposed_at, merge.record_id, {
            **_head("draft_merge", merge.record_id, merge.record_id, merge.title, merge.text),
            "version": merge.version, "memory_type": merge.memory_type,
            "scope": merge.scope, "agent_id": merge.agent_id, "proposer": merge.proposer,
            "proposed_at": merge.proposed_at.isoformat(),
            "members": [jsonable(member) for member in merge.members],
            "review": review_bodies(namespace, {"record_id": merge.record_id})}))
    for learning in learnings:
        items.append((learning.proposed_at, learning.record_id, {
            **_head("proposed_lesson", learning.record_id, learning.record_id, learning.title,
                    learning.text),
            "version": learning.version, "memory_type": learning.memory_type,
            "scope": learning.scope, "agent_id": learning.agent_id,
            "proposer": learning.proposer, "proposed_at": learning.proposed_at.isoformat(),
            "source_ref": learning.source_ref, "related_ids": list(learning.related_ids),
            "review": review_bodies(namespace, {"record_id": learning.record_id})}))
    items.sort(key=lambda item: (item[0], item[1]))
    return [item for _, _, item in items]


def review_bodies(namespace: str, target: Mapping[str, Any]) -> dict[str, Any]:
    """How an item is decided: the route, and the body that approves it or rejects it."""
    return {"route": REVIEW_ROUTE,
            **{decision: {"namespace": namespace, "decision": decision, **target}
               for decision in ("approve", "reject")}}


def _head(kind: ReviewKind, item_id: str, record_id: str | None, title: str | None,
          text: str | None) -> dict[str, Any]:
    """What every item has: its kind, the id `memstream review approve|reject` takes, the
    record it is about (None for a block's diff), and that record's title and text."""
    return {"kind": kind, "id": item_id, "record_id": record_id, "title": title, "text": text}
