"""What of a record gets embedded: its title, if any, on a line before its text."""

from __future__ import annotations


def embedding_text(title: str | None, text: str) -> str:
    return f"{title}\n{text}" if title else text
