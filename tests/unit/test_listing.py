from datetime import UTC, datetime, timedelta, timezone

import pytest

from processors.api.listing import (
    DESCRIPTION_CHARS,
    ListingPosition,
    cursor_position,
    description,
    encode_cursor,
)
from processors.api.parameters import InvalidValue


def test_a_description_is_the_first_sentence_of_the_first_line() -> None:
    assert description("\n\n  Deploys run on Fridays.  Never on a holiday.\nSecond line.") == \
        "Deploys run on Fridays."
    assert description("no end mark here\nnext") == "no end mark here"
    assert description("Spaces\tare   one.") == "Spaces are one."
    assert description("") == ""


def test_a_long_description_is_cut_at_a_word() -> None:
    text = "word " * 60
    cut = description(text)
    assert len(cut) <= DESCRIPTION_CHARS and cut.endswith("word…")
    # No space in the first half: cut where the line ends.
    assert description("x" * 300) == "x" * (DESCRIPTION_CHARS - 1) + "…"


def test_a_cursor_stands_for_its_position() -> None:
    at = datetime(2025, 3, 1, 12, 30, tzinfo=timezone(timedelta(hours=2)))
    position = ListingPosition(at, "mem_1|odd")
    found = cursor_position(encode_cursor(position))
    assert found == position and found.created_at.tzinfo is not None
    assert found.created_at == at.astimezone(UTC)


@pytest.mark.parametrize("cursor", ["", "not base64!", "bm9waXBl",
                                    "MjAyNS0wMy0wMVQxMjozMDowMHxtZW1fMQ"])
def test_anything_else_is_not_a_cursor(cursor: str) -> None:
    # The last: a time without its offset, which no listing gives.
    with pytest.raises(InvalidValue, match="not a cursor this listing gave"):
        cursor_position(cursor)
