"""`memory.block` → a core memory block edited, rotated if full → its archive a memory.

An edit is applied in the order of its partition (memory events are keyed by namespace).
What a rotation moves out of the block is stored first, as a personal memory of the block's
agent (embedded, indexed, announced `created`, with provenance back to the block version),
then the block's new version. A replay of an edit whose version is stored changes nothing;
one that stopped in between finds its archive stored (its id and text follow from the event)
and stores the version.
"""

from __future__ import annotations

from processors.blocks import archival_text, edit_block, empty_block
from processors.embedding_text import embedding_text
from processors.ids import memory_record_id
from processors.intake import Parsed
from schemas.events import MemoryBlock
from schemas.records import Record
from stores.core_blocks import CoreBlocks
from streams.failures import Attempts
from streams.messages import InboundMessage
from streams.record_sink import RecordChange, RecordSink
from streams.runtime import Runtime


def archive_record_id(namespace: str, event_id: str) -> str:
    return memory_record_id(namespace, f"block-archive:{event_id}")


class BlockEditor:
    def __init__(self, runtime: Runtime, sink: RecordSink, blocks: CoreBlocks,
                 max_chars: int, attempts: Attempts) -> None:
        self._runtime = runtime
        self._sink = sink
        self._blocks = blocks
        self._max_chars = max_chars
        self._attempts = attempts

    async def apply_one(self, message: InboundMessage, parsed: Parsed[MemoryBlock]) -> str:
        event = parsed.event
        payload = event.payload
        if await self._blocks.saved_edit(event.event_id) is not None:
            return "duplicate"
        block = await self._blocks.block(event.namespace, payload.agent_id, payload.label) \
            or empty_block(event.namespace, payload.agent_id, payload.label)
        edit = edit_block(block, payload, self._max_chars)
        archive_id = None
        if edit.archived:
            archive = Record(
                record_id=archive_record_id(event.namespace, event.event_id),
                namespace=event.namespace, record_kind="memory", scope="personal",
                agent_id=payload.agent_id, title=f"Archived from the {payload.label} block",
                text=archival_text(edit.block, edit.archived, event.occurred_at),
                body={"archived_from": {"label": payload.label, "agent_id": payload.agent_id,
                                        "version": edit.block.version}},
                memory_type="fact", tags=("archival", f"block:{payload.label}"),
                trust_class="derived",
                provenance=message.provenance(event.event_id, event.producer),
                created_at=event.occurred_at)
            await self._store_archive(message, archive)
            archive_id = archive.record_id
        await self._blocks.save_edit(edit, event.event_id, event.producer, archive_id)
        return "rotated" if edit.archived else "edited"

    async def _store_archive(self, message: InboundMessage, archive: Record) -> None:
        if not await self._sink.unannounced([archive]):
            return
        vectors = await self._runtime.embed([embedding_text(archive.title, archive.text)])
        stored = await self._sink.store_new(
            [RecordChange(archive, "created", 1, vectors[0], (message,))], self._attempts)
        if stored.failed:
            _, error = stored.failed[0]
            raise error
