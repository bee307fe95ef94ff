"""Extractive condensing: long free text is cut at sentence boundaries, never mid-word."""

from __future__ import annotations

import re

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def condense(text: str, max_chars: int) -> str:
    """The leading sentences of `text` that fit in `max_chars`, with an ellipsis if cut."""
    text = " ".join(text.split()) if "\n" not in text else text.strip()
    if len(text) <= max_chars:
        return text
    kept: list[str] = []
    used = 0
    for sentence in sentences(text):
        if used + len(sentence) + 1 > max_chars - 1:
            break
        kept.append(sentence)
        used += len(sentence) + 1
    if not kept:
        # One sentence longer than the budget: cut at the last word boundary.
        head = text[: max_chars - 1]
        return (head.rsplit(" ", 1)[0] if " " in head else head) + "…"
    return " ".join(kept) + " …"


def sentences(text: str) -> list[str]:
    """The sentences of `text` in order (a line break ends one too), whitespace collapsed."""
    return [" ".join(part.split()) for part in _SENTENCE_END.split(text) if part.strip()]


def approx_tokens(text: str) -> int:
    """Token cost estimate for budgets: about four characters per token for English."""
    return (len(text) + 3) // 4
