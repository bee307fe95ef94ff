"""The error taxonomy: every failure says whether trying again can help, and why it happened.

As in aiokafka's `errors.py`, one base class with a `retriable` flag:

    MemstreamError                 retriable  dead-letter reason
    ├── Unavailable                yes        (never dead-lettered: the partition waits)
    │   ├── StoreUnavailable                  Postgres unreachable, timed out, deadlocked
    │   ├── IndexUnavailable                  the vector index unreachable
    │   └── BrokerUnavailable                 the Kafka broker unreachable
    ├── Rejected                   no         the event is unusable (its own reason)
    ├── Refused                    no
    │   ├── StoreRefused                      refused_by_store: Postgres refuses the data
    │   │   └── ModelMismatch                 a worker's embedding model is not the store's
    │   ├── IndexRefused                      refused_by_index: the index refuses the data
    │   └── BrokerRefused                     refused_by_broker: the broker refuses a message
    └── Unexpected                 yes, a bounded number of times, then internal_error

A retriable failure is retried with backoff for as long as it lasts, since the event is not
at fault; a permanent one dead-letters the one event at fault; an unexpected one (a bug, or a
failure nobody classified) is retried a few times, then dead-lettered as `internal_error` so
that it can be replayed once the bug is fixed.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from pathlib import PurePath
from typing import ClassVar, Literal

DeadLetterReason = Literal[
    "oversized",
    "malformed_json",
    "not_an_object",
    "unknown_type",
    "missing_namespace",
    "invalid_event",
    "invalid_text",
    "broken_reference",
    "stale_version",
    "invalid_transition",
    "refused_by_store",
    "refused_by_index",
    "refused_by_broker",
    "internal_error",
]


@dataclass(frozen=True)
class Rejection:
    """Why an event was dead-lettered: a reason from the closed list above and the detail."""

    reason: DeadLetterReason
    detail: str


class MemstreamError(Exception):
    retriable: ClassVar[bool] = False
    reason: DeadLetterReason = "internal_error"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail

    @property
    def rejection(self) -> Rejection:
        return Rejection(self.reason, self.detail)


class Unavailable(MemstreamError):
    """A dependency cannot answer now; the same call will succeed once it is back."""

    retriable = True


class StoreUnavailable(Unavailable):
    pass


class IndexUnavailable(Unavailable):
    pass


class BrokerUnavailable(Unavailable):
    pass


class Rejected(MemstreamError):
    """Raised by domain rules that refuse an event: it is unusable as it is."""

    def __init__(self, reason: DeadLetterReason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.reason}: {self.detail}"


class Refused(MemstreamError):
    """A store accepted the call but refuses this data, and always will."""


class StoreRefused(Refused):
    reason = "refused_by_store"


class ModelMismatch(StoreRefused):
    """The store holds another embedding model's vectors, or is moving to one: a worker of
    this model would mix vectors no cosine can compare (stores/embedding_model.py)."""


class IndexRefused(Refused):
    reason = "refused_by_index"


class BrokerRefused(Refused):
    reason = "refused_by_broker"


class Unexpected(MemstreamError):
    """An exception nobody classified: worth a few more tries, not an endless loop."""

    retriable = True

    @classmethod
    def of(cls, exc: BaseException) -> Unexpected:
        """The traceback's last line (`Type: message`) and where it was raised."""
        message = str(exc).strip().splitlines()
        detail = f"{type(exc).__name__}: {message[-1]}" if message else type(exc).__name__
        frames = traceback.extract_tb(exc.__traceback__)
        if frames:
            frame = frames[-1]
            detail += f" (at {PurePath(frame.filename).name}:{frame.lineno} in {frame.name})"
        return cls(detail)
