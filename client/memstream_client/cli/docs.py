"""The documents `memstream docs sync` finds under a directory: .md, .markdown and .txt
files, each named by its path relative to the directory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from memstream_client.events import MAX_DOCUMENT_CHARS

SUFFIXES: dict[str, Literal["markdown", "text"]] = {
    ".md": "markdown", ".markdown": "markdown", ".txt": "text"}


@dataclass(frozen=True)
class LocalDocument:
    doc_id: str
    content_type: Literal["markdown", "text"]
    text: str
    title: str | None


def local_documents(root: Path) -> tuple[list[LocalDocument], list[str]]:
    """The documents under `root` (.md, .markdown, .txt), each named by its path relative to
    `root`, by name; and why each file left out was (not UTF-8, empty, too long)."""
    found: list[LocalDocument] = []
    skipped: list[str] = []
    for path in sorted(root.rglob("*")):
        content_type = SUFFIXES.get(path.suffix.lower())
        if content_type is None or not path.is_file():
            continue
        doc_id = path.relative_to(root).as_posix()
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            skipped.append(f"{doc_id}: not UTF-8")
            continue
        if not text.strip():
            skipped.append(f"{doc_id}: empty")
        elif len(text) > MAX_DOCUMENT_CHARS:
            skipped.append(f"{doc_id}: {len(text)} characters, over {MAX_DOCUMENT_CHARS}")
        else:
            found.append(LocalDocument(doc_id, content_type, text, title_of(text, content_type)))
    return found, skipped


def title_of(text: str, content_type: str) -> str | None:
    """A Markdown document's first `# ` heading."""
    if content_type != "markdown":
        return None
    for line in text.splitlines():
        if line.startswith("# ") and line[2:].strip():
            return line[2:].strip()[:200]
    return None
