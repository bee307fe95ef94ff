"""`GET /v1/changes`: a namespace's record versions in the order they were made, after an
opaque cursor, for a reader that polls (`memstream tail`) instead of consuming
`memory.updated`. Each change carries the cursor that resumes after it; `next` is the cursor
after the last one (where the request started when there was nothing new). `since` starts the
feed at a time instead of a cursor."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from faust.web import Request, Response, View

from processors.access import Caller
from processors.parameters import IDENTIFIER, VERSION, InvalidValue, instant, integer, opaque
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

    @pages.page("/v1/changes", params=CHANGES_PARAMS)
    async def changes_view(web: View, request: Request, caller: Caller) -> Response:
        namespace = granted_namespace(caller, request.query)
        after = start_position(request.query)
        limit = value(request.query, "limit", LIMIT, CHANGES_LIMIT)
        found = await versions.changes(namespace, after, limit,
                                       personal_reader(caller, request.query))
        return web.json({
            "namespace": namespace,
            "changes": [change_json(change) for change in found],
            "next": encode_cursor(found[-1].position) if found else
            "" if after is None else encode_cursor(after),
        })


def encode_cursor(position: ChangePosition) -> str:
    raw = f"{position.changed_at.isoformat()}|{position.version}|{position.record_id}"
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


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
    """The position a cursor of `encode_cursor` stands for (its time in UTC); None for no
    cursor. Its parts follow the rules of the values they are (processors/parameters.py)."""
    cursor = cursor.strip()
    if not cursor:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        changed_at, version, record_id = raw.split("|", 2)
        # The feed's times carry their offset. A version's position names its record; a
        # time's (from `since`), none and version 0.
        if datetime.fromisoformat(changed_at).tzinfo is not None:
            if not record_id and version == "0":
                return ChangePosition(instant(changed_at), "", 0)
            return ChangePosition(instant(changed_at), IDENTIFIER(record_id), VERSION(version))
    except (binascii.Error, UnicodeDecodeError, ValueError):
        pass
    raise InvalidValue("not a cursor this feed gave")


CHANGES_PARAMS: Params = {**READER_PARAMS, "after": Param(opaque(
    cursor_position, "the cursor of a change the feed gave")),
                          "since": Param(instant), "limit": Param(LIMIT)}


def change_json(change: VersionChange) -> dict[str, Any]:
    position = change.position
    return {"record_id": position.record_id, "version": position.version,
            "change": change.change, "actor": change.actor, "event_id": change.event_id,
            "changed_at": position.changed_at.isoformat(), "changed": list(change.changed),
            "reason": change.reason, "record_kind": change.record_kind,
            "memory_type": change.memory_type, "scope": change.scope,
            "agent_id": change.agent_id, "title": change.title, "excerpt": change.excerpt,
            "cursor": encode_cursor(position)}
