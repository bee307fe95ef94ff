"""A request's query parameters, read and checked: what is missing or unusable is a
`BadQuery`, which every view answers 400 with its message (streams/api/pages.py)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any


class BadQuery(ValueError):
    """The request's parameters are unusable; the message says which and why."""


def required(params: Mapping[str, str], name: str, what: str = "") -> str:
    value = params.get(name, "").strip()
    if not value:
        raise BadQuery(f"{name} is required{what}")
    return value


def bounded_limit(raw: str, maximum: int) -> int:
    """A list's `limit` as asked, an integer from 1 to `maximum`."""
    try:
        limit = int(raw)
    except ValueError:
        limit = 0
    if not 1 <= limit <= maximum:
        raise BadQuery(f"limit must be an integer between 1 and {maximum}")
    return limit


def repeated(params: Any, name: str, known: frozenset[str] | None) -> list[str]:
    """A parameter that may repeat or hold a comma-separated list, checked against `known`."""
    values = params.getall(name, []) if hasattr(params, "getall") else (
        [params[name]] if name in params else [])
    found = list(dict.fromkeys(v.strip() for item in values for v in item.split(",")
                               if v.strip()))
    unknown = set(found) - known if known is not None else set()
    if unknown:
        raise BadQuery(f"unknown {name} {sorted(unknown)}; known: {sorted(known or ())}")
    return found


def moment(params: Mapping[str, str], name: str) -> float | None:
    """An ISO 8601 time (a date alone is its midnight, UTC), as epoch seconds."""
    raw = params.get(name, "").strip()
    if not raw:
        return None
    try:
        parsed = datetime.fromisoformat(raw)
    except ValueError:
        raise BadQuery(f"{name} must be an ISO 8601 date or time, got {raw!r}") from None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
