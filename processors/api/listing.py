"""How a listing of records names each one and where it goes on: a one-line description of a
record's text (what an agent reads of its memories before it asks for one whole, seed 001's
summaries), and the opaque cursor of a listing newest first, a position (created_at, id)
that new records do not move, unlike an offset."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from processors.api import cursors
from processors.api.parameters import IDENTIFIER

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
    return cursors.encode_cursor(position.created_at, position.record_id)


def cursor_position(cursor: str) -> ListingPosition:
    """The position a cursor of `encode_cursor` stands for."""
    return cursors.position_of(cursor, 1, "listing", lambda created_at, keys: ListingPosition(
        created_at, IDENTIFIER(keys[0])))
