"""`GET /v1/changes`: a namespace's record versions in the order they were made, after an
opaque cursor, for a reader that polls (`memstream tail`) instead of consuming
`memory.updated`. Each change carries the cursor that resumes after it; `next` is the cursor
after the last one (where the request started when there was nothing new). `since` starts the
feed at a time instead of a cursor."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from faust.web import Request, Response, View

from processors.access import Caller
from stores.record_versions import ChangePosition, VersionChange
from streams.api.auth import granted_namespace, personal_reader
from streams.api.pages import Pages
from streams.api.params import BadQuery, bounded_limit, moment
from streams.plumbing.runtime import Runtime

# Changes answered per request, by default and at most.
CHANGES_LIMIT = 100
MAX_CHANGES_LIMIT = 1000


def wire_changes(pages: Pages, runtime: Runtime) -> None:
    versions = runtime.stores.versions

    @pages.page("/v1/changes")
    async def changes_view(web: View, request: Request, caller: Caller) -> Response:
        namespace = granted_namespace(caller, request.query)
        after = start_position(request.query)
        limit = bounded_limit(request.query.get("limit", str(CHANGES_LIMIT)),
                              MAX_CHANGES_LIMIT)
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
    after = cursor_position(params.get("after", ""))
    since = moment(params, "since")
    if since is None:
        return after
    if after is not None:
        raise BadQuery("give after or since, not both")
    return ChangePosition(datetime.fromtimestamp(since, UTC), "", 0)


def cursor_position(cursor: str) -> ChangePosition | None:
    """The position a cursor of `encode_cursor` stands for; None for no cursor."""
    cursor = cursor.strip()
    if not cursor:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        changed_at, version, record_id = raw.split("|", 2)
        position = ChangePosition(datetime.fromisoformat(changed_at), record_id, int(version))
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise BadQuery("after is not a cursor this feed gave") from None
    # A version's position names its record; a time's (from `since`), none and version 0.
    if position.changed_at.tzinfo is None or (not record_id) != (position.version == 0):
        raise BadQuery("after is not a cursor this feed gave")
    return position


def change_json(change: VersionChange) -> dict[str, Any]:
    position = change.position
    return {"record_id": position.record_id, "version": position.version,
            "change": change.change, "actor": change.actor, "event_id": change.event_id,
            "changed_at": position.changed_at.isoformat(), "changed": list(change.changed),
            "reason": change.reason, "record_kind": change.record_kind,
            "memory_type": change.memory_type, "scope": change.scope,
            "agent_id": change.agent_id, "title": change.title, "excerpt": change.excerpt,
            "cursor": encode_cursor(position)}
