"""The read views of what is kept: a record's versions, what changed between two of them,
the diffs waiting for review, and an agent's core blocks. JSON-ready answers; None where
the record or block is unknown."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from processors.blocks import BlockDiff, usage
from processors.lifecycle import PendingDiff, RecordVersion, version_diff
from stores.core_blocks import CoreBlocks
from stores.record_versions import PersonalReader, RecordVersions
from streams.search import BadQuery

# Versions of a block shown with it, newest first.
BLOCK_VERSIONS_SHOWN = 20
# Pending diffs listed per request, by default and at most.
DIFFS_LIMIT = 50
MAX_DIFFS_LIMIT = 500


async def record_history(versions: RecordVersions, namespace: str,
                         record_id: str) -> dict[str, Any] | None:
    history = await versions.history(namespace, record_id)
    if history is None:
        return None
    return {"namespace": namespace, "record_id": record_id,
            "versions": [_version_json(version) for version in history]}


async def record_diff(versions: RecordVersions, namespace: str, record_id: str,
                      params: Mapping[str, str]) -> dict[str, Any] | None:
    """`from` and `to` versions (by default the one before the current, and the current)."""
    history = await versions.history(namespace, record_id)
    if history is None:
        return None
    by_number = {version.version: version for version in history}
    newer = _version_param(params, "to", history[-1].version)
    older = _version_param(params, "from", max(newer - 1, 1))
    missing = [str(n) for n in (older, newer) if n not in by_number]
    if missing:
        raise BadQuery(f"{record_id} has no version {', '.join(missing)} "
                       f"(it has 1 to {history[-1].version})")
    return {"namespace": namespace, **version_diff(by_number[older], by_number[newer])}


async def pending_diffs(versions: RecordVersions, blocks: CoreBlocks, namespace: str,
                        params: Mapping[str, str], reader: PersonalReader) -> dict[str, Any]:
    """Diffs waiting for review, of records and of core blocks, oldest first, of what
    `reader` may see; `record_id` keeps a record's alone."""
    limit = _version_param(params, "limit", DIFFS_LIMIT)
    if limit > MAX_DIFFS_LIMIT:
        raise BadQuery(f"limit must be at most {MAX_DIFFS_LIMIT}")
    record_id = params.get("record_id") or None
    found = [_diff_json(diff) for diff in
             await versions.pending_diffs(namespace, record_id, limit, reader)]
    if record_id is None:
        found += [_block_diff_json(diff) for diff in
                  await blocks.pending_block_diffs(namespace, limit, reader)]
    found.sort(key=lambda diff: (diff["proposed_at"], diff["diff_id"]))
    return {"namespace": namespace, "pending_diffs": found[:limit]}


async def core_block(blocks: CoreBlocks, namespace: str, agent_id: str, label: str,
                     max_chars: int) -> dict[str, Any] | None:
    """A block as its agent sees it (the bracketed text), its fields, how full it is, its
    rotation strategy and its last versions, with the archives rotations made."""
    block = await blocks.block(namespace, agent_id, label)
    if block is None:
        return None
    versions = await blocks.versions(namespace, agent_id, label, BLOCK_VERSIONS_SHOWN)
    return {
        "namespace": namespace, "agent_id": agent_id, "label": label,
        "version": block.version, "text": block.text,
        "fields": {name: value if isinstance(value, str) else list(value)
                   for name, value in block.fields.items()},
        "chars": len(block.text), "max_chars": max_chars,
        "usage": round(usage(block, max_chars), 3),
        "strategy": block.strategy, "threshold": block.threshold,
        "versions": [{"version": v.version, "actor": v.actor, "event_id": v.event_id,
                      "changed": list(v.changed), "changed_at": v.changed_at.isoformat(),
                      "usage_before_rotation": round(v.usage, 3),
                      "archived_record_id": v.archived_record_id} for v in versions],
    }


def _version_param(params: Mapping[str, str], name: str, default: int) -> int:
    raw = params.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise BadQuery(f"{name} must be a positive integer")
    return value


def _version_json(version: RecordVersion) -> dict[str, Any]:
    return {"version": version.version, "change": version.change, "actor": version.actor,
            "event_id": version.event_id, "changed_at": version.changed_at.isoformat(),
            "changed": list(version.changed), "reason": version.reason, "text": version.text,
            **version.fields}


def _block_diff_json(diff: BlockDiff) -> dict[str, Any]:
    return {"diff_id": diff.diff_id, "target": "block",
            "block": {"agent_id": diff.agent_id, "label": diff.label},
            "base_version": diff.base_version,
            "proposed": diff.payload.model_dump(mode="json", exclude_defaults=True,
                                                exclude={"agent_id", "label"}),
            "proposer": diff.proposer, "proposed_at": diff.proposed_at.isoformat(),
            "state": diff.state}


def _diff_json(diff: PendingDiff) -> dict[str, Any]:
    return {"diff_id": diff.diff_id, "target": "record", "record_id": diff.record_id,
            "base_version": diff.base_version, "proposed": dict(diff.proposed),
            "proposer": diff.proposer, "proposed_at": diff.proposed_at.isoformat(),
            "state": diff.state}
