"""The opaque cursors of listings that go on from a position: a time and the keys that order
what shares it, base64 so that a client passes them back untouched rather than building them.
A position, unlike an offset, is not moved by what is written meanwhile."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from processors.api.parameters import InvalidValue, instant

P = TypeVar("P")


def encode_cursor(at: datetime, *keys: str) -> str:
    """The cursor of the position (`at`, *`keys`)."""
    raw = "|".join([at.isoformat(), *keys])
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def position_of(cursor: str, keys: int, given_by: str,
                position: Callable[[datetime, list[str]], P]) -> P:
    """The position a cursor of `encode_cursor` stands for, built by `position` from its time
    (in UTC) and its `keys` strings, each checked by the rule of the value it is; any other
    text is refused, naming what gives such cursors (`given_by`: "listing")."""
    cursor = cursor.strip()
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        at, *rest = raw.split("|", keys)
        # The cursors' times carry their offset.
        if len(rest) == keys and datetime.fromisoformat(at).tzinfo is not None:
            return position(instant(at), rest)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        pass
    raise InvalidValue(f"not a cursor this {given_by} gave")
