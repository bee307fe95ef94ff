"""What both clients share, none of it I/O: a call of a route as data (`Call`: its method,
path, query and body, which statuses answer it, how its answer is read, and whether it may be
sent again once it may have reached the worker), how an answer becomes a result or an error,
and when a failed call is sent again (`Retries`). The clients (`client.py`) send."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import ValidationError

from memstream_client.sdk.errors import (
    MemstreamError,
    TimedOut,
    UnexpectedAnswer,
    Unreachable,
    error_of,
)

T = TypeVar("T")
QueryValue = str | int | float | datetime | Sequence[str] | None
Query = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    # The answer's JSON to the result.
    read: Callable[[Any], T]
    query: Query = ()
    body: Mapping[str, Any] | None = None
    answered_by: frozenset[int] = frozenset({200})
    # Whether sending it again changes nothing even if the first one was applied: reads,
    # and writes, which carry their event id. Making a key is not.
    repeatable: bool = True


def query_of(**params: QueryValue) -> Query:
    """Query pairs: None left out, a sequence repeated, a time in ISO 8601."""
    pairs: list[tuple[str, str]] = []
    for name, value in params.items():
        if value is None:
            continue
        if isinstance(value, str | int | float | datetime):
            pairs.append((name, text_of(value)))
        else:
            pairs.extend((name, item) for item in value)
    return tuple(pairs)


def body_of(**fields: Any) -> dict[str, Any]:
    """A JSON body: None left out (the event takes its default), a time in ISO 8601."""
    return {name: value.isoformat() if isinstance(value, datetime) else value
            for name, value in fields.items() if value is not None}


def text_of(value: str | int | float | datetime) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)


def segment(value: str) -> str:
    """A value as one segment of a path: a `/`, `?` or `#` in an id stays in the id."""
    return quote(value, safe="")


def answer_of(call: Call[T], status: int, content: bytes, reason_phrase: str) -> T:
    """The result of an answer, or the error it stands for."""
    if status not in call.answered_by:
        raise error_of(status, content, reason_phrase)
    try:
        body = json.loads(content)
    except ValueError:
        raise UnexpectedAnswer(f"{call.method} {call.path}: the answer is not JSON",
                               status=status) from None
    try:
        return call.read(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the answer"
        raise UnexpectedAnswer(
            f"{call.method} {call.path}: not the answer this client knows ({where}: "
            f"{first['msg']})", status=status, body=body) from None


def unreachable(url: str, exc: httpx.TransportError) -> Unreachable:
    """No answer, and whether the request may have reached the worker."""
    if isinstance(exc, httpx.TimeoutException):
        return TimedOut(f"the worker at {url} did not answer in time",
                        sent=not isinstance(exc, httpx.ConnectTimeout))
    if isinstance(exc, httpx.ConnectError):
        return Unreachable(f"the worker is not reachable at {url} "
                           f"({type(exc).__name__}: {exc})", sent=False)
    return Unreachable(f"the worker at {url} did not answer ({type(exc).__name__}: {exc})",
                       sent=True)


@dataclass(frozen=True)
class Retries:
    """A failed call is sent again, as it was (a write with the same event id, which the
    worker applies once), when its failure is retriable (a 503, or no answer), at most
    `attempts` times, after a delay that doubles from `first_delay_s` up to `max_delay_s`.
    A call that is not repeatable is sent again only if it never reached the worker."""

    attempts: int = 3
    first_delay_s: float = 0.25
    max_delay_s: float = 4.0

    def delay(self, call: Call[Any], failure: MemstreamError, retried: int) -> float | None:
        """How long to wait before sending `call` again after its `retried`-th retry failed
        with `failure` (0: the first try); None: raise it."""
        if retried >= self.attempts or not failure.retriable:
            return None
        if isinstance(failure, Unreachable) and failure.sent and not call.repeatable:
            return None
        return min(self.first_delay_s * 2.0 ** retried, self.max_delay_s)
