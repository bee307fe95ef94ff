"""What a call of the API raises: one base class, as in the worker's own taxonomy
(processors/events/errors.py), with whether the same call may succeed later (`retriable`), the HTTP
status (None when no answer came) and, for a body the worker's intake refuses, the reason
its dead letter would carry (`reason`: `invalid_event`, `missing_namespace`, …;
docs/bad-input.md).

    MemstreamError             retriable  when
    ├── ConfigError            no         a setting missing or unreadable (no request made)
    ├── Unreachable            yes        no answer: the worker not reachable
    │   └── TimedOut           yes        no answer in time
    ├── UnexpectedAnswer       no         an answer that is not what the route answers
    ├── BadRequest             no         400: a parameter or body refused (with `reason`)
    ├── Unauthorized           no         401: no key, or an unknown or revoked one
    ├── Forbidden              no         403: the key may not do this here
    ├── NotFound               no         404: no such thing, or one the key may not see
    └── Unavailable            yes        503: the key cannot be checked now, or the broker
                                          did not acknowledge a write (`event_id`)

Another status is a `MemstreamError` with that status.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar


class MemstreamError(Exception):
    retriable: ClassVar[bool] = False

    def __init__(self, detail: str, *, status: int | None = None, reason: str | None = None,
                 body: Any = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status
        self.reason = reason
        # The answer's JSON, when there was one.
        self.body = body


class ConfigError(MemstreamError):
    pass


class Unreachable(MemstreamError):
    retriable = True

    def __init__(self, detail: str, *, sent: bool) -> None:
        super().__init__(detail)
        # Whether the request may have reached the worker (then only a call that is the
        # same event when sent again may be sent again).
        self.sent = sent


class TimedOut(Unreachable):
    pass


class UnexpectedAnswer(MemstreamError):
    pass


class BadRequest(MemstreamError):
    pass


class Unauthorized(MemstreamError):
    pass


class Forbidden(MemstreamError):
    pass


class NotFound(MemstreamError):
    pass


class Unavailable(MemstreamError):
    retriable = True

    @property
    def event_id(self) -> str | None:
        """A write's event id, to send again with: the worker applies it once."""
        found = self.body.get("event_id") if isinstance(self.body, dict) else None
        return found if isinstance(found, str) else None


BY_STATUS: dict[int, type[MemstreamError]] = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 503: Unavailable}
# An answer's text shown when it is not the API's JSON error.
TEXT_SHOWN = 200


def error_of(status: int, content: bytes, reason_phrase: str) -> MemstreamError:
    """The error an answer of `status` stands for: its `error` and `reason` when it is the
    API's JSON error (`{"error", "reason"?}`), else the start of its text."""
    try:
        body = json.loads(content)
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        detail = body["error"]
        reason = body.get("reason") if isinstance(body.get("reason"), str) else None
    else:
        detail = content.decode("utf-8", "replace").strip()[:TEXT_SHOWN] or reason_phrase
        reason = None
    return BY_STATUS.get(status, MemstreamError)(detail, status=status, reason=reason,
                                                 body=body)
