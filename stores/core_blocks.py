"""Core memory blocks and their versions in Postgres (seed 004). `CoreBlocks` is the
contract the stream stage and the read view use."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, cast

import asyncpg

from memstream_client.events import MemoryBlockPayload, RotationStrategy
from processors.events.errors import MemstreamError
from processors.memory.blocks import Block, BlockDiff, BlockEdit, FieldValue
from stores.record_versions import PersonalReader


@dataclass(frozen=True)
class BlockVersion:
    version: int
    text: str
    event_id: str
    actor: str
    changed: tuple[str, ...]
    usage: float
    archived_record_id: str | None
    changed_at: datetime


@dataclass(frozen=True)
class SavedEdit:
    """An edit found stored: a replay changes nothing, but finishes its archive."""

    version: int
    archived_record_id: str | None


class CoreBlocks(Protocol):
    async def block(self, namespace: str, agent_id: str, label: str) -> Block | None: ...

    async def labels(self, namespace: str, agent_id: str) -> list[str]:
        """The labels of the agent's blocks, in order."""

    async def saved_edit(self, event_id: str) -> SavedEdit | None: ...

    async def save_edit(self, edit: BlockEdit, event_id: str, actor: str,
                        archived_record_id: str | None,
                        approved_diff: str | None = None) -> None:
        """Store the edited block and its version (and, for an approved diff, its decision)
        in one transaction; raises `BlockConflict` if the block moved on since it was
        read."""

    async def versions(self, namespace: str, agent_id: str, label: str,
                       limit: int) -> list[BlockVersion]: ...

    async def propose(self, diff: BlockDiff) -> None:
        """Keep a proposed edit; older pending ones of the block are superseded by it."""

    async def block_diff(self, namespace: str, diff_id: str) -> BlockDiff | None: ...

    async def decided_by(self, event_id: str) -> bool:
        """Whether this review event decided a diff already."""

    async def reject(self, diff_id: str, reviewer: str, event_id: str) -> None: ...

    async def pending_block_diffs(self, namespace: str, limit: int,
                                  reader: PersonalReader) -> list[BlockDiff]:
        """The pending diffs of the blocks of the agents `reader` may see, oldest first."""


class BlockConflict(MemstreamError):
    """Another edit of the block was stored between reading it and saving this one: read
    it again and edit again."""

    retriable = True


class PostgresCoreBlocks:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool


    async def block(self, namespace: str, agent_id: str, label: str) -> Block | None:
        row = await self._pool.fetchrow(
            "SELECT * FROM core_blocks WHERE namespace = $1 AND agent_id = $2 AND label = $3",
            namespace, agent_id, label)
        if row is None:
            return None
        return Block(namespace=namespace, agent_id=agent_id, label=label,
                     fields=_fields_of(row["fields"]), version=int(row["version"]),
                     strategy=cast(RotationStrategy, row["strategy"]),
                     threshold=round(float(row["threshold"]), 2),
                     rotations=tuple(row["rotations"]))

    async def labels(self, namespace: str, agent_id: str) -> list[str]:
        rows = await self._pool.fetch(
            "SELECT label FROM core_blocks WHERE namespace = $1 AND agent_id = $2 "
            "ORDER BY label", namespace, agent_id)
        return [row["label"] for row in rows]

    async def saved_edit(self, event_id: str) -> SavedEdit | None:
        row = await self._pool.fetchrow(
            "SELECT version, archived_record_id FROM core_block_versions WHERE event_id = $1",
            event_id)
        return None if row is None else SavedEdit(int(row["version"]),
                                                  row["archived_record_id"])

    async def save_edit(self, edit: BlockEdit, event_id: str, actor: str,
                        archived_record_id: str | None,
                        approved_diff: str | None = None) -> None:
        block = edit.block
        fields = _fields_json(block.fields)
        async with self._pool.acquire() as connection, connection.transaction():
            stored = await connection.fetchval(
                """
                INSERT INTO core_blocks (namespace, agent_id, label, fields, version, strategy,
                                         threshold, rotations)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                ON CONFLICT (namespace, agent_id, label) DO UPDATE
                SET fields = excluded.fields, version = excluded.version,
                    strategy = excluded.strategy, threshold = excluded.threshold,
                    rotations = excluded.rotations, updated_at = now()
                WHERE core_blocks.version = excluded.version - 1
                RETURNING version
                """,
                block.namespace, block.agent_id, block.label, fields, block.version,
                block.strategy, block.threshold, list(block.rotations))
            if stored is None:
                raise BlockConflict(f"block {block.label} of {block.agent_id} moved on")
            await connection.execute(
                """
                INSERT INTO core_block_versions (namespace, agent_id, label, version, fields,
                    text, event_id, actor, changed, usage, archived_record_id)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
                """,
                block.namespace, block.agent_id, block.label, block.version, fields,
                block.text, event_id, actor, list(edit.changed), edit.usage_before_rotation,
                archived_record_id)
            if approved_diff is not None:
                await _decide(connection, approved_diff, "approved", actor, event_id)

    async def versions(self, namespace: str, agent_id: str, label: str,
                       limit: int) -> list[BlockVersion]:
        rows = await self._pool.fetch(
            "SELECT * FROM core_block_versions WHERE namespace = $1 AND agent_id = $2"
            " AND label = $3 ORDER BY version DESC LIMIT $4",
            namespace, agent_id, label, limit)
        return [BlockVersion(int(row["version"]), row["text"], row["event_id"], row["actor"],
                             tuple(row["changed"]), float(row["usage"]),
                             row["archived_record_id"], row["changed_at"]) for row in rows]


    async def propose(self, diff: BlockDiff) -> None:
        async with self._pool.acquire() as connection, connection.transaction():
            await connection.execute(
                "UPDATE core_block_diffs SET state = 'superseded', decided_at = now()"
                " WHERE namespace = $1 AND agent_id = $2 AND label = $3 AND state = 'pending'",
                diff.namespace, diff.agent_id, diff.label)
            await connection.execute(
                f"INSERT INTO core_block_diffs ({_DIFF_COLUMNS})"
                " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending')",
                diff.diff_id, diff.namespace, diff.agent_id, diff.label, diff.base_version,
                diff.payload.model_dump(mode="json", exclude_none=True), diff.proposer,
                diff.proposed_at)

    async def block_diff(self, namespace: str, diff_id: str) -> BlockDiff | None:
        row = await self._pool.fetchrow(
            f"SELECT {_DIFF_COLUMNS} FROM core_block_diffs"
            " WHERE namespace = $1 AND diff_id = $2", namespace, diff_id)
        return None if row is None else _diff_of(row)

    async def decided_by(self, event_id: str) -> bool:
        found = await self._pool.fetchval(
            "SELECT 1 FROM core_block_diffs WHERE decision_event_id = $1", event_id)
        return found is not None

    async def reject(self, diff_id: str, reviewer: str, event_id: str) -> None:
        async with self._pool.acquire() as connection:
            await _decide(connection, diff_id, "rejected", reviewer, event_id)

    async def pending_block_diffs(self, namespace: str, limit: int,
                                  reader: PersonalReader) -> list[BlockDiff]:
        # A block is its agent's own, as a personal memory is.
        rows = await self._pool.fetch(
            f"SELECT {_DIFF_COLUMNS} FROM core_block_diffs WHERE namespace = $1"
            " AND state = 'pending' AND ($3 OR agent_id = $4)"
            " ORDER BY proposed_at, diff_id LIMIT $2",
            namespace, limit, reader.every_agent, reader.agent_id)
        return [_diff_of(row) for row in rows]


_DIFF_COLUMNS = ("diff_id, namespace, agent_id, label, base_version, payload, proposer,"
                 " proposed_at, state")


async def _decide(connection: asyncpg.Connection, diff_id: str, state: str, reviewer: str,
                  event_id: str) -> None:
    await connection.execute(
        "UPDATE core_block_diffs SET state = $2, decided_by = $3, decided_at = now(),"
        " decision_event_id = $4 WHERE diff_id = $1 AND state = 'pending'",
        diff_id, state, reviewer, event_id)


def _diff_of(row: Mapping[str, Any]) -> BlockDiff:
    return BlockDiff(
        diff_id=row["diff_id"], namespace=row["namespace"], agent_id=row["agent_id"],
        label=row["label"], base_version=int(row["base_version"]),
        payload=MemoryBlockPayload.model_validate(row["payload"]), proposer=row["proposer"],
        proposed_at=row["proposed_at"], state=row["state"])


def _fields_json(fields: Mapping[str, FieldValue]) -> list[list[Any]]:
    # A list of pairs: jsonb objects do not keep the order fields were set in.
    return [[name, value if isinstance(value, str) else list(value)]
            for name, value in fields.items()]


def _fields_of(stored: list[list[Any]]) -> dict[str, FieldValue]:
    return {name: value if isinstance(value, str) else tuple(value) for name, value in stored}
