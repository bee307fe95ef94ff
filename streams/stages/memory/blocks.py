"""`memory.block` → a core memory block edited, rotated if full → its archive a memory; or,
when blocks are protected (MEMSTREAM_PROTECT=core_blocks), the edit kept as a pending diff
until a `memory.review` of the block approves (applies) or rejects it.

An edit is applied in the order of its partition (memory events are keyed by namespace).
What a rotation moves out of the block is stored first, as a personal memory of the block's
agent (embedded, indexed, announced `created`, with provenance back to the block version),
then the block's new version. A replay of an edit whose version is stored changes nothing;
one that stopped in between finds its archive stored (its id and text follow from the event)
and stores the version.
"""

from __future__ import annotations

from datetime import datetime

from memstream_client.events import BlockRef, MemoryBlock, MemoryReview
from memstream_client.ids import memory_record_id
from processors.events.errors import Rejected
from processors.events.intake import Parsed
from processors.memory.blocks import (
    BlockDiff,
    BlockEdit,
    approved_edit,
    archival_text,
    edit_block,
    empty_block,
)
from processors.text.embedding import embedding_text
from schemas.records import Record
from stores.core_blocks import CoreBlocks
from streams.plumbing.failures import Attempts
from streams.plumbing.messages import InboundMessage
from streams.plumbing.runtime import Runtime
from streams.stages.record_sink import RecordChange, RecordSink


def archive_record_id(namespace: str, event_id: str) -> str:
    return memory_record_id(namespace, f"block-archive:{event_id}")


class BlockEditor:
    def __init__(self, runtime: Runtime, sink: RecordSink, blocks: CoreBlocks,
                 max_chars: int, attempts: Attempts, *, protected: bool) -> None:
        self._runtime = runtime
        self._sink = sink
        self._blocks = blocks
        self._max_chars = max_chars
        self._attempts = attempts
        self._protected = protected

    async def apply_one(self, message: InboundMessage, parsed: Parsed[MemoryBlock]) -> str:
        event = parsed.event
        payload = event.payload
        if self._protected:
            return await self._propose(event)
        if await self._blocks.saved_edit(event.event_id) is not None:
            return "duplicate"
        block = await self._blocks.block(event.namespace, payload.agent_id, payload.label) \
            or empty_block(event.namespace, payload.agent_id, payload.label)
        edit = edit_block(block, payload, self._max_chars)
        await self._commit(message, event.event_id, event.producer, event.occurred_at, edit)
        return "rotated" if edit.archived else "edited"

    async def review(self, message: InboundMessage, parsed: Parsed[MemoryReview],
                     ref: BlockRef, diff_id: str) -> str:
        """A reviewer's decision on a block's pending diff: approved, the edit is applied to
        the block as it is now (refused if the block moved on since it was proposed)."""
        event = parsed.event
        payload = event.payload
        if await self._blocks.decided_by(event.event_id):
            return "duplicate"
        diff = await self._blocks.block_diff(event.namespace, diff_id)
        if diff is None or (diff.agent_id, diff.label) != (ref.agent_id, ref.label):
            raise Rejected("broken_reference", f"no pending diff {diff_id} of block "
                           f"{ref.label} of {ref.agent_id}")
        if payload.decision == "reject":
            if diff.state != "pending":
                raise Rejected("invalid_transition", f"diff {diff_id} is {diff.state}")
            await self._blocks.reject(diff_id, payload.reviewer, event.event_id)
            return "rejected"
        block = await self._blocks.block(event.namespace, ref.agent_id, ref.label) \
            or empty_block(event.namespace, ref.agent_id, ref.label)
        edit = approved_edit(block, diff, self._max_chars)
        await self._commit(message, event.event_id, payload.reviewer, event.occurred_at, edit,
                           approved_diff=diff_id)
        return "approved"

    async def _propose(self, event: MemoryBlock) -> str:
        if await self._blocks.block_diff(event.namespace, event.event_id) is not None:
            return "duplicate"
        payload = event.payload
        block = await self._blocks.block(event.namespace, payload.agent_id, payload.label)
        await self._blocks.propose(BlockDiff(
            diff_id=event.event_id, namespace=event.namespace, agent_id=payload.agent_id,
            label=payload.label, base_version=block.version if block else 0, payload=payload,
            proposer=event.producer, proposed_at=event.occurred_at))
        return "proposed"

    async def _commit(self, message: InboundMessage, event_id: str, actor: str,
                      at: datetime, edit: BlockEdit, approved_diff: str | None = None) -> None:
        """Store what the edit archived, then the block's new version."""
        block = edit.block
        archive_id = None
        if edit.archived:
            archive = Record(
                record_id=archive_record_id(block.namespace, event_id),
                namespace=block.namespace, record_kind="memory", scope="personal",
                agent_id=block.agent_id, title=f"Archived from the {block.label} block",
                text=archival_text(block, edit.archived, at),
                body={"archived_from": {"label": block.label, "agent_id": block.agent_id,
                                        "version": block.version}},
                memory_type="fact", tags=("archival", f"block:{block.label}"),
                trust_class="derived", provenance=message.provenance(event_id, actor),
                created_at=at)
            await self._store_archive(message, archive)
            archive_id = archive.record_id
        await self._blocks.save_edit(edit, event_id, actor, archive_id, approved_diff)

    async def _store_archive(self, message: InboundMessage, archive: Record) -> None:
        if not await self._sink.unannounced([archive]):
            return
        vectors = await self._runtime.embed([embedding_text(archive.title, archive.text)],
                                            role="passage")
        stored = await self._sink.store_new(
            [RecordChange(archive, "created", 1, vectors[0], (message,))], self._attempts)
        if stored.failed:
            _, error = stored.failed[0]
            raise error
