"""`GET /v1/review-queue`: everything in a namespace that waits for a reviewer, in one list,
oldest first: the pending diffs of records and core blocks (each as `/v1/pending-diffs` lists
it), the draft merges of consolidation, with their members, and the proposed lessons (the
lessons and patterns derived from runs, still drafts), with what they are learnt from. Each
item says how it is decided: the `POST /v1/reviews` body that approves it and the one that
rejects it, a `memory.review` published to Kafka like every write. What the key may not read
is left out, as in every listing: another agent's personal records, blocks and merges."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from faust.web import Request, View

from memstream_client.answers.review import (
    AgentBlock,
    ReviewBodies,
    ReviewBody,
    ReviewItem,
    ReviewQueue,
)
from memstream_client.answers.review import PendingDiff as PendingDiffAnswer
from processors.api.access import Caller
from processors.api.parameters import IDENTIFIER, integer
from processors.memory.blocks import BlockDiff
from processors.memory.lifecycle import PendingDiff
from stores.record_versions import DraftMerge, ProposedLearningDraft
from stores.records import FoundRecord
from streams.api.auth import granted_namespace, personal_reader
from streams.api.pages import Pages
from streams.api.params import READER_PARAMS, Param, Params, optional, value
from streams.api.rendering import block_diff_answer, diff_answer, member_answer
from streams.plumbing.runtime import Runtime

# Items listed per request, by default and at most (as for /v1/pending-diffs).
QUEUE_LIMIT = 50
MAX_QUEUE_LIMIT = 500
LIMIT = integer(1, MAX_QUEUE_LIMIT)
QUEUE_PARAMS: Params = {**READER_PARAMS, "record_id": Param(IDENTIFIER), "limit": Param(LIMIT)}
# Where every item of the queue is decided.
REVIEW_ROUTE = "POST /v1/reviews"


def wire_review_queue(pages: Pages, runtime: Runtime) -> None:
    stores = runtime.stores

    @pages.page("/v1/review-queue", params=QUEUE_PARAMS, answer=ReviewQueue)
    async def review_queue_view(web: View, request: Request, caller: Caller) -> ReviewQueue:
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
        return ReviewQueue(namespace=namespace, items=queue_items(
            namespace, diffs, block_diffs, merges, subjects, learnings)[:limit])


def queue_items(namespace: str, diffs: Sequence[PendingDiff],
                block_diffs: Sequence[BlockDiff], merges: Sequence[DraftMerge],
                subjects: Mapping[str, FoundRecord],
                learnings: Sequence[ProposedLearningDraft]) -> list[ReviewItem]:
    """Every item, oldest first (ties by id). `subjects`: the records the diffs change, whose
    title and text an item shows as they are now (what the diff would change)."""
    items: list[ReviewItem] = []
    for diff in diffs:
        subject = subjects.get(diff.record_id)
        items.append(diff_item(
            diff_answer(diff), subject.title if subject else None,
            subject.text if subject else None,
            review_bodies(ReviewBody(namespace=namespace, decision="approve",
                                     record_id=diff.record_id, diff_id=diff.diff_id))))
    for block_diff in block_diffs:
        block = AgentBlock(agent_id=block_diff.agent_id, label=block_diff.label)
        items.append(diff_item(
            block_diff_answer(block_diff), None, None,
            review_bodies(ReviewBody(namespace=namespace, decision="approve", block=block,
                                     diff_id=block_diff.diff_id))))
    for merge in merges:
        items.append(ReviewItem(
            kind="draft_merge", id=merge.record_id, record_id=merge.record_id,
            title=merge.title, text=merge.text, version=merge.version,
            memory_type=merge.memory_type, scope=merge.scope, agent_id=merge.agent_id,
            proposer=merge.proposer, proposed_at=merge.proposed_at,
            members=[member_answer(member) for member in merge.members],
            review=review_bodies(ReviewBody(namespace=namespace, decision="approve",
                                            record_id=merge.record_id))))
    for learning in learnings:
        items.append(ReviewItem(
            kind="proposed_lesson", id=learning.record_id, record_id=learning.record_id,
            title=learning.title, text=learning.text, version=learning.version,
            memory_type=learning.memory_type, scope=learning.scope,
            agent_id=learning.agent_id, proposer=learning.proposer,
            proposed_at=learning.proposed_at, source_ref=learning.source_ref,
            related_ids=list(learning.related_ids),
            review=review_bodies(ReviewBody(namespace=namespace, decision="approve",
                                            record_id=learning.record_id))))
    items.sort(key=lambda item: (item.proposed_at, item.id))
    return items


def diff_item(diff: PendingDiffAnswer, title: str | None, text: str | None,
              review: ReviewBodies) -> ReviewItem:
    """A pending diff as the queue lists it: everything /v1/pending-diffs gives it, and the
    title and text of the record it would change (none for a block's)."""
    item = ReviewItem(
        kind="pending_diff", id=diff.diff_id, record_id=diff.record_id, title=title,
        text=text, diff_id=diff.diff_id, target=diff.target, base_version=diff.base_version,
        proposed=diff.proposed, proposer=diff.proposer, proposed_at=diff.proposed_at,
        state=diff.state, review=review)
    # A record's diff names no block, a block's no record: the field is absent, not null.
    return item if diff.block is None else item.model_copy(update={"block": diff.block})


def review_bodies(approve: ReviewBody) -> ReviewBodies:
    """How an item is decided: the route, and the body that approves it or the same body
    that rejects it."""
    return ReviewBodies(route=REVIEW_ROUTE, approve=approve,
                        reject=approve.model_copy(update={"decision": "reject"}))
