"""The rules of a request's parameters and path segments, so that a read takes what a write
takes and refuses what a write refuses (streams/api/params.py says which parameter of which
route follows which rule).

- The name of something stored (a namespace, a record or agent id, a tag, a block label)
  follows the rule of the event field it matches (memstream_client/events.py), and a key id is a key
  id (processors/api/access.py).
- No value may hold U+0000 or a lone surrogate, which Postgres cannot store: a write refuses
  them in every field but prose, which it cleans so that no event is lost
  (processors/events/intake.py). A read refuses them in its free text too (a query, an error): its
  caller is there to correct the request.
- A filter names one of its known values, a number is within its range, a time is ISO 8601
  (a date alone is its midnight, a time without an offset is UTC) and has a UTC form.

Each rule is a parser: it returns the value it read, or raises `InvalidValue` saying why. It
carries the JSON Schema of the values it takes, from which the API's OpenAPI document
describes every parameter (processors/api/openapi.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from pydantic import TypeAdapter, ValidationError

from memstream_client.events import (
    BlockLabel,
    DocumentId,
    Identifier,
    Instant,
    ItemId,
    Namespace,
    Repo,
    SecurityScope,
    Tag,
)
from processors.api.access import KEY_ID
from processors.events.intake import unstorable_character

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
Parser = Callable[[str], T]

# Digits enough for any limit, version or budget; more is no number a route takes.
_INTEGER = re.compile(r"[+-]?[0-9]{1,18}")
# Characters of a refused value repeated in the reason.
_SHOWN_CHARS = 60


class InvalidValue(ValueError):
    """A value its rule refuses; the message says why."""


@dataclass(frozen=True)
class Rule(Generic[T_co]):
    """A parser, and the JSON Schema of the strings it takes (as a query parameter or path
    segment gives them: an integer rule's schema is an integer's)."""

    read: Callable[[str], T_co]
    schema: Mapping[str, Any]

    def __call__(self, value: str) -> T_co:
        return self.read(value)


def storable(text: str) -> str:
    what = unstorable_character(text)
    if what is not None:
        raise InvalidValue(f"holds {what}, which no stored value may hold")
    return text


def _field(annotation: Any) -> Rule[str]:
    """The rule of an event field of this type."""
    adapter: TypeAdapter[str] = TypeAdapter(annotation)

    def parse(value: str) -> str:
        try:
            return adapter.validate_python(storable(value))
        except ValidationError as exc:
            raise InvalidValue(f"{_reason(exc)} (got {shown(value)})") from None

    return Rule(parse, adapter.json_schema())


NAMESPACE = _field(Namespace)
IDENTIFIER = _field(Identifier)
TAG = _field(Tag)
REPO = _field(Repo)
SECURITY_SCOPE = _field(SecurityScope)
BLOCK_LABEL = _field(BlockLabel)
DOC_ID = _field(DocumentId)
PLANNING_ITEM = _field(ItemId)


def _api_key_id(value: str) -> str:
    if KEY_ID.fullmatch(value) is None:
        raise InvalidValue(f"a key id is 12 hexadecimal digits (got {shown(value)})")
    return value


api_key_id = Rule(_api_key_id, {"type": "string", "pattern": f"^{KEY_ID.pattern}$"})


def opaque(read: Callable[[str], T], description: str) -> Rule[T]:
    """The rule of a string whose form is the server's own (a cursor it gave): its schema
    says what it is in words."""
    return Rule(read, {"type": "string", "description": description})


def text(max_chars: int) -> Rule[str]:
    """Free text of at most `max_chars` characters."""

    def parse(value: str) -> str:
        if len(value) > max_chars:
            raise InvalidValue(f"is longer than {max_chars} characters")
        return storable(value)

    return Rule(parse, {"type": "string", "maxLength": max_chars})


def one_of(known: Collection[str]) -> Rule[str]:
    def parse(value: str) -> str:
        if value not in known:
            raise InvalidValue(f"unknown {shown(value)}; known: {', '.join(sorted(known))}")
        return value

    return Rule(parse, {"type": "string", "enum": sorted(known)})


def integer(low: int, high: int) -> Rule[int]:
    def parse(value: str) -> int:
        if _INTEGER.fullmatch(value.strip()) is None or not low <= int(value) <= high:
            raise InvalidValue(f"must be an integer from {low} to {high}")
        return int(value)

    return Rule(parse, {"type": "integer", "minimum": low, "maximum": high})


def _boolean(value: str) -> bool:
    if value not in ("true", "false"):
        raise InvalidValue(f"must be true or false (got {shown(value)})")
    return value == "true"


BOOLEAN: Rule[bool] = Rule(_boolean, {"type": "boolean"})


# A record's version, which Postgres keeps as an integer.
VERSION = integer(1, 2**31 - 1)


def number(low: float, high: float) -> Rule[float]:
    def parse(value: str) -> float:
        try:
            found = float(value)
        except ValueError:
            found = math.nan
        # NaN fails the comparison too.
        if not low <= found <= high:
            raise InvalidValue(f"must be a number from {low:g} to {high:g}")
        return found

    return Rule(parse, {"type": "number", "minimum": low, "maximum": high})


_INSTANT: TypeAdapter[datetime] = TypeAdapter(Instant)


def _instant(value: str) -> datetime:
    """An ISO 8601 time, in UTC: a date alone is its midnight, a time without offset UTC."""
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidValue(f"must be an ISO 8601 date or time (got {shown(value)})") from None
    try:
        return _INSTANT.validate_python(
            parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC))
    except ValidationError as exc:
        raise InvalidValue(_reason(exc)) from None


# A date alone is no `date-time` in JSON Schema's sense: the schema says so in words.
instant = Rule(_instant, {"type": "string", "description": (
    "an ISO 8601 date or time; a date alone is its midnight, a time without an offset UTC")})


def _reason(exc: ValidationError) -> str:
    """The rule's own words, as pydantic relays them."""
    return str(exc.errors()[0]["msg"]).removeprefix("Value error, ")


def shown(value: str) -> str:
    """A value as a reason repeats it: quoted, and cut when long."""
    quoted = repr(value)
    return quoted if len(quoted) <= _SHOWN_CHARS else f"{quoted[:_SHOWN_CHARS]}…"
