"""How a listing of records names each one and where it goes on: a one-line description of a
record's text (what an agent reads of its memories before it asks for one whole, seed 001's
summaries), and the opaque cursor of a listing newest first, a position (created_at, id)
that new records do not move, unlike an offset."""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from datetime import datetime

from processors.parameters import IDENTIFIER, InvalidValue, instant

# What a listing shows of a record's text, at most.
DESCRIPTION_CHARS = 120
# A sentence ends at one of these followed by a space.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
ELLIPSIS = "…"


def description(text: str, max_chars: int = DESCRIPTION_CHARS) -> str:
    """The first sentence of the first line that holds any, on one line, cut at a word (with
    '…') when longer than `max_chars`."""
    first_line = next((line for line in text.splitlines() if line.strip()), "")
    sentence = " ".join(_SENTENCE_END.split(first_line.strip(), maxsplit=1)[0].split())
    if len(sentence) <= max_chars:
        return sentence
    cut = sentence[: max_chars - len(ELLIPSIS)]
    # At the last space, unless that would drop more than half of what fits.
    space = cut.rfind(" ")
    if space >= max_chars // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + ELLIPSIS


@dataclass(frozen=True)
class ListingPosition:
    """Where a listing, newest first, goes on: after this record."""

    created_at: datetime
    record_id: str


def encode_cursor(position: ListingPosition) -> str:
    raw = f"{position.created_at.isoformat()}|{position.record_id}"
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def cursor_position(cursor: str) -> ListingPosition:
    """The position a cursor of `encode_cursor` stands for; its parts follow the rules of the
    values they are (processors/parameters.py)."""
    cursor = cursor.strip()
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        at, record_id = raw.split("|", 1)
        # The listing's times carry their offset.
        if datetime.fromisoformat(at).tzinfo is not None:
            return ListingPosition(instant(at), IDENTIFIER(record_id))
    except (binascii.Error, UnicodeDecodeError, ValueError):
        pass
    raise InvalidValue("not a cursor this listing gave")
