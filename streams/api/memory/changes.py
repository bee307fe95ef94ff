"""`GET /v1/changes`: a namespace's record versions in the order they were made, after an
opaque cursor, for a reader that polls (`memstream tail`) instead of consuming
`memory.updated`. Each change carries the cursor that resumes after it; `next` is the cursor
after the last one (where the request started when there was nothing new). `since` starts the
feed at a time instead of a cursor."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from faust.web import Request, View

from memstream_client.answers.records import Change, Changes
from processors.api import cursors
from processors.api.access import Caller
from processors.api.parameters import IDENTIFIER, VERSION, instant, integer, opaque
from stores.record_versions import ChangePosition, VersionChange
from streams.api.auth import granted_namespace, personal_reader
from streams.api.pages import Pages
from streams.api.params import READER_PARAMS, BadQuery, Param, Params, optional, value
from streams.plumbing.runtime import Runtime

# Changes answered per request, by default and at most.
CHANGES_LIMIT = 100
MAX_CHANGES_LIMIT = 1000
LIMIT = integer(1, MAX_CHANGES_LIMIT)


def wire_changes(pages: Pages, runtime: Runtime) -> None:
    versions = runtime.stores.versions

    @pages.page("/v1/changes", params=CHANGES_PARAMS, answer=Changes)
    async def changes_view(web: View, request: Request, caller: Caller) -> Changes:
        namespace = granted_namespace(caller, request.query)
        after = start_position(request.query)
        limit = value(request.query, "limit", LIMIT, CHANGES_LIMIT)
        found = await versions.changes(namespace, after, limit,
                                       personal_reader(caller, request.query))
        return Changes(
            namespace=namespace, changes=[change_answer(change) for change in found],
            next=encode_cursor(found[-1].position) if found else
            "" if after is None else encode_cursor(after))


def encode_cursor(position: ChangePosition) -> str:
    return cursors.encode_cursor(position.changed_at, str(position.version), position.record_id)


def start_position(params: Mapping[str, str]) -> ChangePosition | None:
    """Where a request reads the feed from: after its cursor `after`, or from the time
    `since`; from the first version with neither."""
    after = optional(params, "after", cursor_position)
    since = optional(params, "since", instant)
    if since is None:
        return after
    if after is not None:
        raise BadQuery("give after or since, not both")
    return ChangePosition(since, "", 0)


def cursor_position(cursor: str) -> ChangePosition | None:
    """The position a cursor of `encode_cursor` stands for; None for no cursor."""
    if not cursor.strip():
        return None
    return cursors.position_of(cursor, 2, "feed", change_position)


def change_position(changed_at: datetime, keys: list[str]) -> ChangePosition:
    # A version's position names its record; a time's (from `since`), none and version 0.
    version, record_id = keys
    if not record_id and version == "0":
        return ChangePosition(changed_at, "", 0)
    return ChangePosition(changed_at, IDENTIFIER(record_id), VERSION(version))


CHANGES_PARAMS: Params = {**READER_PARAMS, "after": Param(opaque(
    cursor_position, "the cursor of a change the feed gave")),
                          "since": Param(instant), "limit": Param(LIMIT)}


def change_answer(change: VersionChange) -> Change:
    position = change.position
    return Change(record_id=position.record_id, version=position.version,
                  change=change.change, actor=change.actor, event_id=change.event_id,
                  changed_at=position.changed_at, changed=list(change.changed),
                  reason=change.reason, record_kind=change.record_kind,
                  memory_type=change.memory_type, scope=change.scope,
                  agent_id=change.agent_id, title=change.title, excerpt=change.excerpt,
                  cursor=encode_cursor(position))
