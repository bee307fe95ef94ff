"""Chunking a document for the documents plane of the context pack (seed 002, seed 001's
contextual chunks).

Markdown is cut into sections at its headings (ATX `#` and setext underlines; a line inside a
fenced code block is never a heading), plain text is one section; a section is cut into
blocks at blank lines (a fenced code block is one block, blank lines and all). Blocks are
packed greedily into chunks whose embedded text (heading path, then the chunk's text) stays
within `max_tokens` of the model's own tokenizer, counted by the function passed in; a block
too large for one chunk is cut at lines, then at words. Consecutive chunks of one section
overlap: a chunk starts with the last blocks (or, when the last block is too long, the last
words) of the one before it, up to `overlap_tokens`.

A chunk's identity is its content: the hash of its document, heading path, text, and which
occurrence of that same content it is in the document. Re-chunking the same text gives the
same chunks; changing one section changes the chunks of that section only.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from processors.text.embedding import embedding_text

ContentType = Literal["markdown", "text"]
# Counts the model's tokens in each text (no special tokens): Embedder.token_costs.
TokenCounter = Callable[[Sequence[str]], list[int]]

# The model reads 256 tokens, two of them its special tokens: what is embedded fits in it.
MAX_CHUNK_TOKENS = 240
OVERLAP_TOKENS = 32
HEADING_SEPARATOR = " > "

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


@dataclass(frozen=True)
class Chunk:
    doc_id: str
    # The headings above the chunk, outermost first; empty before the first heading.
    heading_path: tuple[str, ...]
    # Its place in the document, from 0.
    position: int
    text: str
    # What the model embeds: the heading path on a line before the text.
    embedded: str
    token_count: int
    content_hash: str

    @property
    def heading(self) -> str:
        return HEADING_SEPARATOR.join(self.heading_path)


@dataclass(frozen=True)
class Section:
    heading_path: tuple[str, ...]
    blocks: tuple[str, ...]


def chunk_document(doc_id: str, text: str, content_type: ContentType, count: TokenCounter,
                   max_tokens: int = MAX_CHUNK_TOKENS,
                   overlap_tokens: int = OVERLAP_TOKENS) -> list[Chunk]:
    """The document's chunks, in order (see the module docstring)."""
    if overlap_tokens >= max_tokens // 2:
        raise ValueError(f"overlap_tokens ({overlap_tokens}) must be under half of "
                         f"max_tokens ({max_tokens})")
    sections = markdown_sections(text) if content_type == "markdown" else \
        [Section((), tuple(_paragraphs(text.splitlines())))]
    texts: list[tuple[tuple[str, ...], str]] = []
    for section in sections:
        heading = HEADING_SEPARATOR.join(section.heading_path)
        texts += [(section.heading_path, body) for body in _pack_section(
            heading, section.blocks, count, max_tokens, overlap_tokens)]
    embedded = [embedding_text(HEADING_SEPARATOR.join(path) or None, body)
                for path, body in texts]
    costs = count(embedded) if embedded else []
    seen: dict[str, int] = {}
    chunks = []
    for position, ((path, body), whole, cost) in enumerate(
            zip(texts, embedded, costs, strict=True)):
        content = _digest(doc_id, *path, "", body)
        occurrence = seen.get(content, 0)
        seen[content] = occurrence + 1
        chunks.append(Chunk(doc_id, path, position, body, whole, cost,
                            _digest(content, str(occurrence))))
    return chunks


def markdown_sections(text: str) -> list[Section]:
    """The sections of a Markdown text, each under its heading path; sections with no text
    under their heading are left out (their heading is in the path of those below)."""
    path: list[tuple[int, str]] = []
    sections: list[Section] = []
    lines: list[str] = []
    fence: str | None = None

    def close() -> None:
        blocks = _paragraphs(lines)
        if blocks:
            sections.append(Section(tuple(title for _, title in path), tuple(blocks)))
        lines.clear()

    def open_heading(level: int, title: str) -> None:
        close()
        while path and path[-1][0] >= level:
            path.pop()
        path.append((level, title))

    for line in text.splitlines():
        in_code = fence is not None or _FENCE.match(line) is not None
        fence = _fence_after(line, fence)
        if in_code:
            lines.append(line)
            continue
        atx = _ATX.match(line)
        if atx:
            open_heading(len(atx.group(1)), (atx.group(2) or "").strip())
            continue
        setext = _SETEXT.match(line)
        paragraph = _last_paragraph(lines)
        if setext and paragraph:
            del lines[len(lines) - len(paragraph):]
            open_heading(1 if setext.group(1)[0] == "=" else 2,
                         " ".join(part.strip() for part in paragraph))
            continue
        lines.append(line)
    close()
    return sections


def _fence_after(line: str, fence: str | None) -> str | None:
    """The code fence open after `line`: none once it closes the open one (a line of the
    fence's character alone), the one it opens, else the one open before it."""
    if fence is not None:
        closes = line.strip().startswith(fence) and set(line.strip()) == {fence[0]}
        return None if closes else fence
    opened = _FENCE.match(line)
    return opened.group(1) if opened else None


def _last_paragraph(lines: Sequence[str]) -> list[str]:
    """The non-blank lines at the end of `lines` that a setext underline turns into a
    heading: none when they end in a fenced block or are empty."""
    start = len(lines)
    while start > 0 and lines[start - 1].strip():
        start -= 1
    paragraph = list(lines[start:])
    if any(_FENCE.match(line) for line in paragraph):
        return []
    return paragraph


def _paragraphs(lines: Sequence[str]) -> list[str]:
    """Blocks separated by blank lines; a fenced code block is one block."""
    blocks: list[str] = []
    current: list[str] = []
    fence: str | None = None
    for line in lines:
        inside = fence is not None
        fence = _fence_after(line, fence)
        if inside:
            current.append(line)
            continue
        if not line.strip() and fence is None:
            if current:
                blocks.append("\n".join(current).strip("\n"))
                current = []
            continue
        current.append(line.rstrip())
    if current:
        blocks.append("\n".join(current).strip("\n"))
    return [block for block in blocks if block.strip()]


def _pack_section(heading: str, blocks: Sequence[str], count: TokenCounter, max_tokens: int,
                  overlap_tokens: int) -> list[str]:
    """The section's blocks packed into chunk texts whose embedded text fits `max_tokens`.

    Costs add up: the tokenizer splits at whitespace, so a text joined from parts costs the
    sum of the parts, and the sum bounds the chunk."""
    room = max_tokens - (count([heading])[0] + 1 if heading else 0)
    if room <= 2 * overlap_tokens:
        raise ValueError(f"heading {heading!r} leaves no room in {max_tokens} tokens")
    units = [unit for block in blocks for unit in _fitting(block, count, room)]
    costs = count(units)
    chunks: list[list[int]] = []
    current: list[int] = []
    used = 0
    for index, cost in enumerate(costs):
        if current and used + cost > room:
            chunks.append(current)
            current, used = _carried(current, costs, overlap_tokens, room - cost)
        current.append(index)
        used += cost
    if current:
        chunks.append(current)
    texts = ["\n\n".join(units[i] for i in chunk) for chunk in chunks]
    return _with_word_overlap(texts, chunks, units, costs, count, overlap_tokens, room)


def _carried(previous: list[int], costs: Sequence[int], overlap_tokens: int,
             room: int) -> tuple[list[int], int]:
    """The last units of the previous chunk that fit in the overlap (and beside the unit
    that comes next)."""
    carried: list[int] = []
    used = 0
    for index in reversed(previous):
        if used + costs[index] > min(overlap_tokens, room):
            break
        carried.insert(0, index)
        used += costs[index]
    return carried, used


def _with_word_overlap(texts: list[str], chunks: list[list[int]], units: Sequence[str],
                       costs: Sequence[int], count: TokenCounter, overlap_tokens: int,
                       room: int) -> list[str]:
    """A chunk that carried no unit of the one before it (its last unit is longer than the
    overlap) starts with that unit's last words instead, as many as fit."""
    result = list(texts)
    for n in range(1, len(chunks)):
        if set(chunks[n]) & set(chunks[n - 1]):
            continue
        own = sum(costs[i] for i in chunks[n])
        budget = min(overlap_tokens, room - own)
        tail = _tail_words(units[chunks[n - 1][-1]], count, budget)
        if tail:
            result[n] = f"{tail}\n\n{texts[n]}"
    return result


def _tail_words(text: str, count: TokenCounter, budget: int) -> str:
    words = text.split()
    taken = 0
    for size in range(1, len(words) + 1):
        if count([" ".join(words[-size:])])[0] > budget:
            break
        taken = size
    return " ".join(words[-taken:]) if taken else ""


def _fitting(block: str, count: TokenCounter, room: int) -> list[str]:
    """The block as parts that each fit in `room`: whole, else by lines, else by words."""
    if count([block])[0] <= room:
        return [block]
    lines = block.split("\n")
    if len(lines) > 1:
        return _greedy(lines, "\n", count, room, lambda line: _fitting(line, count, room))
    words = block.split()
    if len(words) > 1:
        return _greedy(words, " ", count, room, lambda word: [word])
    # One word longer than a chunk: cut it into pieces that fit.
    return _pieces(block, count, room)


def _greedy(parts: Sequence[str], joiner: str, count: TokenCounter, room: int,
            split: Callable[[str], list[str]]) -> list[str]:
    costs = count(list(parts))
    out: list[str] = []
    current: list[str] = []
    used = 0
    for part, cost in zip(parts, costs, strict=True):
        if cost > room:
            if current:
                out.append(joiner.join(current))
                current, used = [], 0
            out += split(part)
            continue
        if current and used + cost > room:
            out.append(joiner.join(current))
            current, used = [], 0
        current.append(part)
        used += cost
    if current:
        out.append(joiner.join(current))
    return out


def _pieces(word: str, count: TokenCounter, room: int) -> list[str]:
    pieces = []
    rest = word
    while rest:
        size = len(rest)
        while size > 1 and count([rest[:size]])[0] > room:
            size //= 2
        pieces.append(rest[:size])
        rest = rest[size:]
    return pieces


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]
