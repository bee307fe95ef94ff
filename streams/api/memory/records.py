"""The read views of what is kept: a record and its lineage, its versions, what changed
between two of them, the diffs waiting for review, an agent's core blocks, and a namespace's
counts; and many records at once: by their ids, or listed newest first a page at a time. A
record the caller may not see is answered as one that does not exist."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, get_args

from faust.web import Request, Response, View

from memstream_client.answers import records as answers
from memstream_client.answers.base import Answer
from memstream_client.answers.review import PendingDiffs
from memstream_client.answers.writes import BlockEditAccepted
from memstream_client.events import MemoryBlock, Scope
from processors.api.access import Caller
from processors.api.listing import ListingPosition, cursor_position, description, encode_cursor
from processors.api.openapi import OneOf, payload_body
from processors.api.parameters import BLOCK_LABEL, IDENTIFIER, VERSION, integer, one_of, opaque
from processors.memory.blocks import usage
from processors.memory.lifecycle import RecordVersion, superseded_note, version_diff
from processors.recall.as_of import standing_at, version_at
from schemas.records import Record
from stores.core_blocks import CoreBlocks
from stores.index.protocol import VectorIndex
from stores.record_versions import PersonalReader, RecordVersions
from stores.records import RecordFilter, RecordLineage, Records, RecordSummary, StoredRecord
from streams.api.auth import granted_namespace, may_see, personal_reader, reader_of
from streams.api.pages import Pages, ViewHandler, no_record
from streams.api.params import (
    AS_OF,
    NAMESPACE_PARAMS,
    READER_PARAMS,
    BadQuery,
    Param,
    Params,
    at_most,
    optional,
    repeated,
    value,
)
from streams.api.publishing import WAIT_PARAMS
from streams.api.queries import KIND, MEMORY_TYPE, REVIEW_STATE, TIER
from streams.api.rendering import block_diff_answer, diff_answer, member_answer
from streams.plumbing.runtime import Runtime

# Versions of a block shown with it, newest first.
BLOCK_VERSIONS_SHOWN = 20
# Pending diffs listed per request, by default and at most.
DIFFS_LIMIT = 50
MAX_DIFFS_LIMIT = 500
DIFFS = integer(1, MAX_DIFFS_LIMIT)
RECORD_PARAMS: Params = {**NAMESPACE_PARAMS, "record_id": Param(IDENTIFIER)}
RECORD_AT_PARAMS: Params = {**RECORD_PARAMS, "as_of": Param(AS_OF)}
DIFF_PARAMS: Params = {**RECORD_PARAMS, "from": Param(VERSION), "to": Param(VERSION)}
# `wait`: how long a block's edit (POST) waits for its outcome.
BLOCK_PARAMS: Params = {**READER_PARAMS, **WAIT_PARAMS, "label": Param(BLOCK_LABEL)}
PENDING_DIFF_PARAMS: Params = {**READER_PARAMS, "record_id": Param(IDENTIFIER),
                               "limit": Param(DIFFS)}
# Records read by id in one request, at most.
MAX_IDS = 100
# Records listed per page, by default and at most.
LISTING_LIMIT = 50
MAX_LISTING_LIMIT = 200
LISTING = integer(1, MAX_LISTING_LIMIT)
SCOPE = one_of(get_args(Scope))
# What narrows a listing (and has no meaning beside `id`).
LISTING_PARAMS: Params = {
    "agent": Param(IDENTIFIER), "kind": Param(KIND, repeats=True),
    "memory_type": Param(MEMORY_TYPE, repeats=True), "tier": Param(TIER, repeats=True),
    "scope": Param(SCOPE, repeats=True), "review_state": Param(REVIEW_STATE, repeats=True),
    "cursor": Param(opaque(cursor_position, "the `next` of the listing's previous page")),
    "limit": Param(LISTING),
}
RECORDS_PARAMS: Params = {**READER_PARAMS, "id": Param(IDENTIFIER, repeats=True),
                          **LISTING_PARAMS}


def wire_records(pages: Pages, runtime: Runtime, index: VectorIndex, block_max_chars: int,
                 edit_block: ViewHandler) -> None:
    """The record, history, diff, pending-diff, block and stats views; a POST to a block is
    `edit_block`'s, the write view of streams/api/memory/writes.py."""
    records, versions, blocks = runtime.stores.records, runtime.stores.versions, \
        runtime.stores.blocks

    @pages.page("/v1/records", params=RECORDS_PARAMS,
                answer=OneOf((answers.RecordBatch, answers.RecordList)))
    async def records_view(web: View, request: Request,
                           caller: Caller) -> answers.RecordBatch | answers.RecordList:
        """With `id` (repeatable): those records whole, in the order asked; without: the
        records listed, newest first, a page at a time."""
        namespace = granted_namespace(caller, request.query)
        query = request.query
        if "id" not in query:
            return await record_listing(records, namespace, personal_reader(caller, query),
                                        query)
        narrowing = sorted(name for name in LISTING_PARAMS if name in query)
        if narrowing:
            raise BadQuery(f"id reads records by id; {', '.join(narrowing)} narrow a listing "
                           "(without id): give one or the other")
        record_ids = at_most(query, "id", IDENTIFIER, MAX_IDS)
        if not record_ids:
            raise BadQuery("id is empty: name the records to read")
        return await records_by_ids(records, caller, namespace, record_ids)

    @pages.page("/v1/records/{record_id}", params=RECORD_AT_PARAMS,
                answer=answers.RecordLineage)
    async def record_view(web: View, request: Request, caller: Caller,
                          record_id: str) -> answers.RecordLineage | Response:
        """The record, its lineage, and whether it is in force; with `as_of`, the version
        that was current then and whether the record was in force then."""
        namespace = granted_namespace(caller, request.query)
        lineage = await records.record_lineage(namespace, record_id)
        if lineage is None or not caller.sees(lineage.record.scope, lineage.record.agent_id):
            return no_record(web, record_id, namespace)
        shown = lineage_answer(lineage)
        as_of = optional(request.query, "as_of", AS_OF)
        if as_of is None:
            return shown
        history = await versions.history(namespace, record_id) or []
        then = version_at(history, as_of)
        return shown.model_copy(update={"as_of": answers.StandingAt(
            moment=as_of, standing=standing_at(history, as_of),
            version=None if then is None else version_then(then))})

    @pages.page("/v1/records/{record_id}/history", params=RECORD_PARAMS,
                answer=answers.RecordHistory)
    async def history_view(web: View, request: Request, caller: Caller,
                           record_id: str) -> answers.RecordHistory | Response:
        namespace = granted_namespace(caller, request.query)
        history = await record_history(versions, namespace, record_id) \
            if await may_see(records, caller, namespace, record_id) else None
        if history is None:
            return no_record(web, record_id, namespace)
        return history

    @pages.page("/v1/records/{record_id}/diff", params=DIFF_PARAMS, answer=answers.RecordDiff)
    async def diff_view(web: View, request: Request, caller: Caller,
                        record_id: str) -> answers.RecordDiff | Response:
        namespace = granted_namespace(caller, request.query)
        diff = await record_diff(versions, namespace, record_id, request.query) \
            if await may_see(records, caller, namespace, record_id) else None
        if diff is None:
            return no_record(web, record_id, namespace)
        return diff

    @pages.page("/v1/blocks/{label}", params=BLOCK_PARAMS, methods=("GET", "POST"),
                answer={"GET": answers.CoreBlock, "POST": BlockEditAccepted},
                body=payload_body(MemoryBlock, filled={"label"}, optional={"agent_id"}))
    async def block_view(web: View, request: Request, caller: Caller,
                         label: str) -> Response | Answer:
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
        return shown

    @pages.page("/v1/pending-diffs", params=PENDING_DIFF_PARAMS, answer=PendingDiffs)
    async def pending_diffs_view(web: View, request: Request, caller: Caller) -> PendingDiffs:
        namespace = granted_namespace(caller, request.query)
        return await pending_diffs(versions, blocks, namespace, request.query,
                                   personal_reader(caller, request.query))

    @pages.page("/v1/stats", params=NAMESPACE_PARAMS, answer=answers.Stats)
    async def stats_view(web: View, request: Request, caller: Caller) -> answers.Stats:
        namespace = granted_namespace(caller, request.query)
        return answers.Stats(namespace=namespace,
                             records=await records.record_counts(namespace),
                             index_points=await index.count(namespace))


async def records_by_ids(records: Records, caller: Caller, namespace: str,
                         record_ids: list[str]) -> answers.RecordBatch:
    """The records with these ids, as stored now, in the order asked, and the ids of those
    that are missing or that the caller may not see, alike."""
    stored = {found.record.record_id: found for found in
              await records.stored_records(namespace, record_ids)
              if caller.sees(found.record.scope, found.record.agent_id)}
    return answers.RecordBatch(
        namespace=namespace,
        records=[stored_record_answer(stored[i]) for i in record_ids if i in stored],
        not_found=[i for i in record_ids if i not in stored])


def record_answer(record: Record) -> answers.RecordView:
    """A record whole, every field as stored."""
    provenance = record.provenance
    return answers.RecordView(
        record_id=record.record_id, namespace=record.namespace,
        record_kind=record.record_kind, scope=record.scope, agent_id=record.agent_id,
        title=record.title, text=record.text, body=dict(record.body),
        memory_type=record.memory_type, tags=list(record.tags),
        related_ids=list(record.related_ids), tier=record.tier,
        review_state=record.review_state, trust_class=record.trust_class,
        source_ref=record.source_ref, run_ref=record.run_ref, thread=record.thread,
        repo=record.repo, security_scope=record.security_scope,
        provenance=answers.RecordProvenance(
            source_event_id=provenance.source_event_id, source_topic=provenance.source_topic,
            source_partition=provenance.source_partition,
            source_offset=provenance.source_offset, producer=provenance.producer),
        created_at=record.created_at, expires_at=record.expires_at,
        valid_until=record.valid_until, invalidated_by=record.invalidated_by)


def stored_record_answer(found: StoredRecord) -> answers.StoredRecord:
    # Every field of a record's is always set: a shallow copy of them keeps them all shown.
    return answers.StoredRecord(**dict(record_answer(found.record)), version=found.version,
                                superseded_by=found.superseded_by)


async def record_listing(records: Records, namespace: str, reader: PersonalReader,
                         params: Any) -> answers.RecordList:
    """A page of the records `reader` may see, newest first, narrowed by the listing's
    filters; `next` is the cursor of the page after, if there is one."""
    wanted = RecordFilter(
        namespace=namespace, reader=reader,
        review_states=tuple(repeated(params, "review_state", REVIEW_STATE) or ("approved",)),
        record_kinds=tuple(repeated(params, "kind", KIND)),
        memory_types=tuple(repeated(params, "memory_type", MEMORY_TYPE)),
        tiers=tuple(repeated(params, "tier", TIER)),
        scopes=tuple(repeated(params, "scope", SCOPE)),
        agent_id=optional(params, "agent", IDENTIFIER))
    limit = value(params, "limit", LISTING, LISTING_LIMIT)
    # One more than asked: whether there is a next page.
    found = await records.list_records(wanted, optional(params, "cursor", cursor_position),
                                       limit + 1)
    shown = found[:limit]
    return answers.RecordList(
        namespace=namespace, records=[summary_answer(item) for item in shown],
        next=encode_cursor(ListingPosition(shown[-1].created_at, shown[-1].record_id))
        if len(found) > limit else None)


def summary_answer(summary: RecordSummary) -> answers.RecordSummary:
    return answers.RecordSummary(
        record_id=summary.record_id, kind=summary.record_kind, title=summary.title,
        description=description(summary.opening), memory_type=summary.memory_type,
        tier=summary.tier, scope=summary.scope, agent_id=summary.agent_id,
        review_state=summary.review_state, created_at=summary.created_at,
        updated_at=summary.updated_at)


def lineage_answer(lineage: RecordLineage) -> answers.RecordLineage:
    """A record, its versions, what it superseded, a merge's members, how sure memory is of
    it and whether it is in force."""
    return answers.RecordLineage(
        record=record_answer(lineage.record), version=lineage.version,
        superseded_by=lineage.superseded_by,
        versions=[answers.LineageVersion(version=v.version, text=v.text, body=dict(v.body),
                                         event_id=v.event_id, changed_at=v.changed_at)
                  for v in lineage.versions],
        supersedes=[answers.SupersededMember(record_id=m.record_id, version=m.version,
                                             title=m.title, text=m.text)
                    for m in lineage.supersedes],
        members=[member_answer(member) for member in lineage.members],
        confidence=lineage.confidence, recorded_at=lineage.recorded_at,
        standing=standing_view(lineage.record, lineage.superseded_by))


async def record_history(versions: RecordVersions, namespace: str,
                         record_id: str) -> answers.RecordHistory | None:
    history = await versions.history(namespace, record_id)
    if history is None:
        return None
    return answers.RecordHistory(namespace=namespace, record_id=record_id,
                                 versions=[version_answer(version) for version in history])


async def record_diff(versions: RecordVersions, namespace: str, record_id: str,
                      params: Mapping[str, str]) -> answers.RecordDiff | None:
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
    # `from` and `to` are aliases, down to each field's change.
    return answers.RecordDiff.model_validate(
        {"namespace": namespace, **version_diff(by_number[older], by_number[newer])})


async def pending_diffs(versions: RecordVersions, blocks: CoreBlocks, namespace: str,
                        params: Mapping[str, str], reader: PersonalReader) -> PendingDiffs:
    """Diffs waiting for review, of records and of core blocks, oldest first, of what
    `reader` may see; `record_id` keeps a record's alone."""
    limit = value(params, "limit", DIFFS, DIFFS_LIMIT)
    record_id = optional(params, "record_id", IDENTIFIER)
    found = [diff_answer(diff) for diff in
             await versions.pending_diffs(namespace, record_id, limit, reader)]
    if record_id is None:
        found += [block_diff_answer(diff) for diff in
                  await blocks.pending_block_diffs(namespace, limit, reader)]
    found.sort(key=lambda diff: (diff.proposed_at, diff.diff_id))
    return PendingDiffs(namespace=namespace, pending_diffs=found[:limit])


async def core_block(blocks: CoreBlocks, namespace: str, agent_id: str, label: str,
                     max_chars: int) -> answers.CoreBlock | None:
    """A block as its agent sees it (the bracketed text), its fields, how full it is, its
    rotation strategy and its last versions, with the archives rotations made."""
    block = await blocks.block(namespace, agent_id, label)
    if block is None:
        return None
    versions = await blocks.versions(namespace, agent_id, label, BLOCK_VERSIONS_SHOWN)
    return answers.CoreBlock(
        namespace=namespace, agent_id=agent_id, label=label, version=block.version,
        text=block.text,
        fields={name: value if isinstance(value, str) else list(value)
                for name, value in block.fields.items()},
        chars=len(block.text), max_chars=max_chars,
        usage=round(usage(block, max_chars), 3), strategy=block.strategy,
        threshold=block.threshold,
        versions=[answers.BlockVersion(version=v.version, actor=v.actor, event_id=v.event_id,
                                       changed=list(v.changed), changed_at=v.changed_at,
                                       usage_before_rotation=round(v.usage, 3),
                                       archived_record_id=v.archived_record_id)
                  for v in versions])


def version_answer(version: RecordVersion) -> answers.RecordVersion:
    # The versioned fields are the store's JSON as each version wrote them (one made before
    # schema 24 has no valid_until): validated, not taken on trust.
    return answers.RecordVersion.model_validate({
        "version": version.version, "change": version.change, "actor": version.actor,
        "event_id": version.event_id, "changed_at": version.changed_at,
        "changed": list(version.changed), "reason": version.reason, "text": version.text,
        **version.fields})


def version_then(version: RecordVersion) -> answers.VersionThen:
    """The version current at a moment, its versioned fields apart."""
    return answers.VersionThen(
        record_id=version.record_id, version=version.version, text=version.text,
        body=dict(version.body),
        # The store's JSON, as for a version of history (version_answer).
        fields=answers.VersionedFields.model_validate(dict(version.fields)),
        change=version.change, actor=version.actor, event_id=version.event_id,
        changed_at=version.changed_at, changed=list(version.changed), reason=version.reason)


def standing_view(record: Record, merged_into: str | None) -> answers.Standing:
    """Whether a record is in force, and if not, what replaced it (and when, for a fact that
    a newer memory restated with another value)."""
    if merged_into is not None:
        return answers.Standing(in_force=False, merged_into=merged_into,
                                note=f"merged into {merged_into}")
    if record.invalidated_by is None:
        return answers.Standing(in_force=True, note=None)
    return answers.Standing(in_force=False, invalidated_by=record.invalidated_by,
                            valid_until=record.valid_until, note=superseded_note(record))
