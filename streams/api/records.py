"""The read views of what is kept: a record and its lineage, its versions, what changed
between two of them, the diffs waiting for review, an agent's core blocks, and a namespace's
counts. A record the caller may not see is answered as one that does not exist."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from faust.web import Request, Response, View

from processors.access import Caller
from processors.blocks import BlockDiff, usage
from processors.lifecycle import PendingDiff, RecordVersion, version_diff
from processors.openapi import payload_body
from processors.parameters import BLOCK_LABEL, IDENTIFIER, VERSION, integer
from schemas.events import MemoryBlock
from stores.core_blocks import CoreBlocks
from stores.record_versions import PersonalReader, RecordVersions
from stores.vector_index import VectorIndex
from streams.api.auth import granted_namespace, may_see, personal_reader, reader_of
from streams.api.pages import Pages, ViewHandler, no_record
from streams.api.params import (
    NAMESPACE_PARAMS,
    READER_PARAMS,
    BadQuery,
    Param,
    Params,
    optional,
    value,
)
from streams.plumbing.json_values import jsonable
from streams.plumbing.runtime import Runtime

# Versions of a block shown with it, newest first.
BLOCK_VERSIONS_SHOWN = 20
# Pending diffs listed per request, by default and at most.
DIFFS_LIMIT = 50
MAX_DIFFS_LIMIT = 500
DIFFS = integer(1, MAX_DIFFS_LIMIT)
RECORD_PARAMS: Params = {**NAMESPACE_PARAMS, "record_id": Param(IDENTIFIER)}
DIFF_PARAMS: Params = {**RECORD_PARAMS, "from": Param(VERSION), "to": Param(VERSION)}
BLOCK_PARAMS: Params = {**READER_PARAMS, "label": Param(BLOCK_LABEL)}
PENDING_DIFF_PARAMS: Params = {**READER_PARAMS, "record_id": Param(IDENTIFIER),
                               "limit": Param(DIFFS)}


def wire_records(pages: Pages, runtime: Runtime, index: VectorIndex, block_max_chars: int,
                 edit_block: ViewHandler) -> None:
    """The record, history, diff, pending-diff, block and stats views; a POST to a block is
    `edit_block`'s, the write view of streams/api/writes.py."""
    records, versions, blocks = runtime.stores.records, runtime.stores.versions, \
        runtime.stores.blocks

    @pages.page("/v1/records/{record_id}", params=RECORD_PARAMS)
    async def record_view(web: View, request: Request, caller: Caller,
                          record_id: str) -> Response:
        namespace = granted_namespace(caller, request.query)
        lineage = await records.record_lineage(namespace, record_id)
        if lineage is None or not caller.sees(lineage.record.scope, lineage.record.agent_id):
            return no_record(web, record_id, namespace)
        return web.json(jsonable(lineage))

    @pages.page("/v1/records/{record_id}/history", params=RECORD_PARAMS)
    async def history_view(web: View, request: Request, caller: Caller,
                           record_id: str) -> Response:
        namespace = granted_namespace(caller, request.query)
        history = await record_history(versions, namespace, record_id) \
            if await may_see(records, caller, namespace, record_id) else None
        if history is None:
            return no_record(web, record_id, namespace)
        return web.json(history)

    @pages.page("/v1/records/{record_id}/diff", params=DIFF_PARAMS)
    async def diff_view(web: View, request: Request, caller: Caller,
                        record_id: str) -> Response:
        namespace = granted_namespace(caller, request.query)
        diff = await record_diff(versions, namespace, record_id, request.query) \
            if await may_see(records, caller, namespace, record_id) else None
        if diff is None:
            return no_record(web, record_id, namespace)
        return web.json(jsonable(diff))

    @pages.page("/v1/blocks/{label}", params=BLOCK_PARAMS, methods=("GET", "POST"),
                body=payload_body(MemoryBlock, filled={"label"}, optional={"agent_id"}))
    async def block_view(web: View, request: Request, caller: Caller, label: str) -> Response:
        if request.method == "POST":
            return await edit_block(web, request, caller=caller, label=label)
        namespace = granted_namespace(caller, request.query)
        agent_id = reader_of(caller, request.query)
        if agent_id is None:
            raise BadQuery("agent_id is required (or a key bound to the agent)")
        shown = await core_block(blocks, namespace, agent_id, label, block_max_chars)
        if shown is None:
            return web.json({"error": f"no block {label!r} for {agent_id!r} in {namespace!r}"},
                            status=404)
        return web.json(shown)

    @pages.page("/v1/pending-diffs", params=PENDING_DIFF_PARAMS)
    async def pending_diffs_view(web: View, request: Request, caller: Caller) -> Response:
        namespace = granted_namespace(caller, request.query)
        return web.json(await pending_diffs(versions, blocks, namespace, request.query,
                                            personal_reader(caller, request.query)))

    @pages.page("/v1/stats", params=NAMESPACE_PARAMS)
    async def stats_view(web: View, request: Request, caller: Caller) -> Response:
        namespace = granted_namespace(caller, request.query)
        return web.json({
            "namespace": namespace,
            "records": await records.record_counts(namespace),
            "index_points": await index.count(namespace),
        })


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
    newer = value(params, "to", VERSION, history[-1].version)
    older = value(params, "from", VERSION, max(newer - 1, 1))
    missing = [str(n) for n in (older, newer) if n not in by_number]
    if missing:
        raise BadQuery(f"{record_id} has no version {', '.join(missing)} "
                       f"(it has 1 to {history[-1].version})")
    return {"namespace": namespace, **version_diff(by_number[older], by_number[newer])}


async def pending_diffs(versions: RecordVersions, blocks: CoreBlocks, namespace: str,
                        params: Mapping[str, str], reader: PersonalReader) -> dict[str, Any]:
    """Diffs waiting for review, of records and of core blocks, oldest first, of what
    `reader` may see; `record_id` keeps a record's alone."""
    limit = value(params, "limit", DIFFS, DIFFS_LIMIT)
    record_id = optional(params, "record_id", IDENTIFIER)
    found = [diff_json(diff) for diff in
             await versions.pending_diffs(namespace, record_id, limit, reader)]
    if record_id is None:
        found += [block_diff_json(diff) for diff in
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


def _version_json(version: RecordVersion) -> dict[str, Any]:
    return {"version": version.version, "change": version.change, "actor": version.actor,
            "event_id": version.event_id, "changed_at": version.changed_at.isoformat(),
            "changed": list(version.changed), "reason": version.reason, "text": version.text,
            **version.fields}


def block_diff_json(diff: BlockDiff) -> dict[str, Any]:
    return {"diff_id": diff.diff_id, "target": "block",
            "block": {"agent_id": diff.agent_id, "label": diff.label},
            "base_version": diff.base_version,
            "proposed": diff.payload.model_dump(mode="json", exclude_defaults=True,
                                                exclude={"agent_id", "label"}),
            "proposer": diff.proposer, "proposed_at": diff.proposed_at.isoformat(),
            "state": diff.state}


def diff_json(diff: PendingDiff) -> dict[str, Any]:
    return {"diff_id": diff.diff_id, "target": "record", "record_id": diff.record_id,
            "base_version": diff.base_version, "proposed": dict(diff.proposed),
            "proposer": diff.proposer, "proposed_at": diff.proposed_at.isoformat(),
            "state": diff.state}
