"""What ends a command early: one line on stderr and an exit code scripts can tell apart,
for the SDK's errors (memstream_client/sdk/errors.py) as for the CLI's own."""

from __future__ import annotations

from memstream_client.sdk.errors import (
    BadRequest,
    ConfigError,
    Forbidden,
    MemstreamError,
    NotFound,
    Unauthorized,
    UnexpectedAnswer,
)

EXIT_OTHER = 1
EXIT_USAGE = 2
EXIT_AUTH = 3
EXIT_NOT_FOUND = 4


class CliError(Exception):
    def __init__(self, exit_code: int, message: str) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def failure_of(error: MemstreamError, *, key_given: bool) -> CliError:
    """An error of the SDK as the CLI reports it; `key_given`: whether a key was sent (a 401
    without one says where a key goes)."""
    detail = error.detail
    if isinstance(error, Unauthorized):
        hint = "" if key_given else \
            " (no key given: set MEMSTREAM_API_KEY or `key` in the config file)"
        return CliError(EXIT_AUTH, f"unauthorized: {detail}{hint}")
    if isinstance(error, Forbidden):
        return CliError(EXIT_AUTH, f"forbidden: {detail}")
    if isinstance(error, NotFound):
        return CliError(EXIT_NOT_FOUND, f"not found: {detail}")
    if isinstance(error, BadRequest):
        return CliError(EXIT_USAGE, f"bad request: {detail}")
    if isinstance(error, ConfigError):
        return CliError(EXIT_USAGE, detail)
    # No answer (the SDK says from where), or one the CLI cannot read.
    if error.status is None or isinstance(error, UnexpectedAnswer):
        return CliError(EXIT_OTHER, detail)
    return CliError(EXIT_OTHER, f"the worker answered {error.status}: {detail}")
