"""What ends a command early: one line on stderr and an exit code scripts can tell apart."""

from __future__ import annotations

EXIT_OTHER = 1
EXIT_USAGE = 2
EXIT_AUTH = 3
EXIT_NOT_FOUND = 4


class CliError(Exception):
    def __init__(self, exit_code: int, message: str) -> None:
        super().__init__(message)
        self.exit_code = exit_code
