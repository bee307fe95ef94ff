"""A request's path segments and query parameters: each route declares the parameters it
takes and the rule of each (processors/api/parameters.py), and the page frame checks them all
before its view runs (streams/api/pages.py). A parameter the route does not take, one given
twice that takes one value, a value its rule refuses, or a required one missing is a
`BadQuery`, which every view answers 400 with its message.

An empty value is a parameter not given. Views read values through the same rules
(`value`, `optional`, `repeated`), so that what they read is what was checked."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from processors.api.parameters import (
    IDENTIFIER,
    NAMESPACE,
    InvalidValue,
    Parser,
    Rule,
    instant,
    shown,
)

T = TypeVar("T")


class BadQuery(ValueError):
    """The request's parameters are unusable; the message says which and why."""


@dataclass(frozen=True)
class Param:
    """One parameter's rule, and whether it may be given more than once, each time a
    comma-separated list."""

    rule: Rule[object]
    repeats: bool = False


Params = Mapping[str, Param]

# A route that takes no query parameters (a write's values are in its body).
NO_PARAMS: Params = {}
# What every read of a namespace takes: the namespace, and (where a read shows personal
# records) the agent whose personal records it shows (streams/api/auth.py).
NAMESPACE_PARAMS: Params = {"namespace": Param(NAMESPACE)}
READER_PARAMS: Params = {**NAMESPACE_PARAMS, "agent_id": Param(IDENTIFIER)}

_PATH_NAME = re.compile(r"\{(\w+)\}")


def path_names(route: str) -> list[str]:
    """The names of a route's path segments (`/v1/records/{record_id}`: record_id)."""
    return _PATH_NAME.findall(route)


def check(params: Params, path: Mapping[str, str], query: Any) -> None:
    """Refuse a request whose path segments or query parameters (a multidict) are not those
    of `params` or break their rules."""
    for name, segment in path.items():
        parsed(name, params[name].rule, segment)
    taken = sorted(name for name in params if name not in path)
    for name in dict.fromkeys(query.keys()):
        param = None if name in path else params.get(name)
        if param is None:
            raise BadQuery(f"unknown parameter {shown(name)}; " + (
                f"this route takes {', '.join(taken)}" if taken
                else "this route takes no query parameters"))
        given = query.getall(name)
        if len(given) > 1 and not param.repeats:
            raise BadQuery(f"{name} is given {len(given)} times; it takes one value")
        for item in _items(given) if param.repeats else given:
            if item:
                parsed(name, param.rule, item)


def required(params: Mapping[str, str], name: str, rule: Parser[T], what: str = "") -> T:
    raw = params.get(name, "")
    if not raw.strip():
        raise BadQuery(f"{name} is required{what}")
    return parsed(name, rule, raw)


def optional(params: Mapping[str, str], name: str, rule: Parser[T]) -> T | None:
    """A parameter read by its rule; None when it is not given."""
    raw = params.get(name, "")
    return parsed(name, rule, raw) if raw else None


def value(params: Mapping[str, str], name: str, rule: Parser[T], default: T) -> T:
    """A parameter read by its rule; `default` when it is not given."""
    found = optional(params, name, rule)
    return default if found is None else found


def repeated(params: Any, name: str, rule: Parser[T]) -> list[T]:
    """A parameter that may repeat or hold a comma-separated list, each item read by its
    rule, once each, in order."""
    values = params.getall(name, []) if hasattr(params, "getall") else (
        [params[name]] if name in params else [])
    return list(dict.fromkeys(parsed(name, rule, item) for item in _items(values) if item))


def at_most(params: Any, name: str, rule: Parser[T], most: int) -> list[T]:
    """A repeated parameter (`repeated`) of at most `most` distinct items."""
    found = repeated(params, name, rule)
    if len(found) > most:
        raise BadQuery(f"{name}: at most {most} in one request (got {len(found)})")
    return found


def moment(params: Mapping[str, str], name: str) -> float | None:
    """An ISO 8601 time (`processors.api.parameters.instant`), as epoch seconds."""
    found = optional(params, name, instant)
    return None if found is None else found.timestamp()


def parsed(name: str, rule: Parser[T], raw: str) -> T:
    """`raw` read by its rule, refused as the value of `name`."""
    try:
        return rule(raw)
    except InvalidValue as exc:
        raise BadQuery(f"{name}: {exc}") from None


def _items(values: list[str]) -> list[str]:
    return [item.strip() for value in values for item in value.split(",")]


# How far ahead of this worker's clock an `as_of` may be: clocks differ a little.
AS_OF_CLOCK_SKEW = timedelta(minutes=1)


def _past_instant(raw: str) -> datetime:
    moment = instant(raw)
    if moment > datetime.now(UTC) + AS_OF_CLOCK_SKEW:
        raise InvalidValue("must not be in the future: memory as it stood at a past moment")
    return moment


AS_OF = Rule(_past_instant, {"type": "string", "description": (
    "memory as it stood at this past moment (ISO 8601): the versions in force then "
    "(docs/lifecycle.md#memory-as-of-a-moment)")})
