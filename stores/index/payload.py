"""The one place where a record becomes an index payload, for the stream and for rebuilds.

`index_payload(row)` accepts a `records` row from asyncpg or a `Record.model_dump()`; both
must give the same payload, or a rebuilt index would filter differently from a live one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

_TEXT_FIELDS = ("record_id", "namespace", "record_kind", "scope", "review_state",
                "trust_class", "tier")


def index_payload(row: Mapping[str, Any]) -> dict[str, Any]:
    """The payload of a record's index point: its filterable fields, JSON-ready, times as
    epoch seconds (floats compare and range-filter alike in every backend)."""
    missing = [name for name in (*_TEXT_FIELDS, "created_at") if row.get(name) is None]
    if missing:
        raise ValueError(f"record {row.get('record_id')!r} lacks {', '.join(missing)}")
    payload: dict[str, Any] = {name: str(row[name]) for name in _TEXT_FIELDS}
    payload["tags"] = _strings(row.get("tags"))
    payload["related_ids"] = _strings(row.get("related_ids"))
    payload["created_at"] = epoch_seconds(row["created_at"])
    expires_at = row.get("expires_at")
    payload["expires_at"] = None if expires_at is None else epoch_seconds(expires_at)
    run_ref = row.get("run_ref")
    payload["run_ref"] = None if run_ref is None else str(run_ref)
    for name in ("agent_id", "memory_type", "security_scope"):
        value = row.get(name)
        payload[name] = None if value is None else str(value)
    # One keyword for every record, so that a search narrowed to a repo is one condition
    # (its repo or none), not a `should` with a null check.
    payload["repo"] = str(row.get("repo") or NAMESPACE_WIDE)
    # Who may read it and until when, each one indexed condition: a filter of `should`s and
    # null checks made every namespace-wide scan three times slower.
    payload["readers"] = [readers_of(payload["scope"], payload["agent_id"])]
    payload["live_until"] = FOREVER if expires_at is None else payload["expires_at"]
    return payload


# The `repo` of a record that belongs to no repo: the whole namespace's
# (memstream_client.events.Repo refuses it as a repo name).
NAMESPACE_WIDE = "*"
# The `live_until` of a record that never expires.
FOREVER = 1e15
SHARED_READERS = "shared"


def readers_of(scope: str, agent_id: str | None) -> str:
    """The readers value of a record: everyone in its namespace, or its owner's vault."""
    return SHARED_READERS if scope == "shared" or agent_id is None else f"agent:{agent_id}"


def epoch_seconds(value: datetime | float | int) -> float:
    """Seconds since the epoch; a naive datetime is taken as UTC (Postgres timestamptz and
    our schemas are always aware, so a naive one can only come from a test or a script)."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.timestamp()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise TypeError(f"expected a datetime or epoch seconds, got {type(value).__name__}")


def _strings(values: Iterable[Any] | None) -> list[str]:
    if values is None:
        return []
    if isinstance(values, str):
        raise TypeError("expected a list of strings, got one string")
    return [str(v) for v in values]
