"""The chunker of the documents plane (processors/documents/chunking.py), counting tokens as
words: the real tokenizer is passed in the same way (Embedder.token_costs)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest

from processors.documents.chunking import chunk_document, markdown_sections


def words(texts: Sequence[str]) -> list[int]:
    return [len(text.split()) for text in texts]


GUIDE = """Intro before any heading.

# Install

Use pip.

## From source

Clone it, then build.

```bash
# not a heading: a comment in a fenced block

make build
```

Setext title
============

Body of the setext section.

Sub part
--------

Under the second-level setext heading.
"""


def test_sections_follow_atx_and_setext_headings_but_not_fenced_lines() -> None:
    sections = markdown_sections(GUIDE)
    assert [s.heading_path for s in sections] == [
        (), ("Install",), ("Install", "From source"), ("Setext title",),
        ("Setext title", "Sub part")]
    fenced = sections[2].blocks
    assert fenced[0] == "Clone it, then build."
    # The fenced block is one block, its blank line and its `#` line kept inside.
    assert fenced[1].startswith("```bash\n# not a heading") and fenced[1].endswith("```")
    assert "\n\nmake build" in fenced[1]


def test_chunks_carry_their_heading_path_position_and_embedded_text() -> None:
    chunks = chunk_document("guide/install.md", GUIDE, "markdown", words)
    assert [c.position for c in chunks] == list(range(len(chunks)))
    source = next(c for c in chunks if c.heading == "Install > From source")
    assert source.doc_id == "guide/install.md"
    assert source.embedded.startswith("Install > From source\n")
    assert source.token_count == len(source.embedded.split())
    assert chunks[0].heading_path == () and chunks[0].embedded == "Intro before any heading."


def test_plain_text_is_cut_by_paragraphs_with_no_heading() -> None:
    text = "\n\n".join(f"paragraph {n} " + "word " * 30 for n in range(6))
    chunks = chunk_document("notes.txt", text, "text", words, max_tokens=80,
                            overlap_tokens=10)
    assert all(c.heading_path == () for c in chunks)
    assert len(chunks) >= 3
    assert all(c.text.startswith(("paragraph", "word")) for c in chunks)
    # "# x" is text, not a heading, in plain text.
    (plain,) = chunk_document("n.txt", "# not a heading\n\nbody", "text", words)[:1]
    assert plain.heading_path == () and plain.text.startswith("# not a heading")


def test_every_chunk_is_bounded_in_tokens_even_an_oversized_block() -> None:
    huge_paragraph = " ".join(f"w{n}" for n in range(500))
    code = "```\n" + "\n".join(f"line {n} of code" for n in range(200)) + "\n```"
    text = f"# Big\n\n{huge_paragraph}\n\n{code}\n\n" + "x" * 5000
    chunks = chunk_document("big.md", text, "markdown", words, max_tokens=60,
                            overlap_tokens=8)
    assert len(chunks) > 10
    assert max(c.token_count for c in chunks) <= 60
    assert all(c.embedded.startswith("Big\n") for c in chunks)
    # Nothing of the text is lost: every word is in some chunk.
    every = " ".join(c.text for c in chunks).split()
    assert {f"w{n}" for n in range(500)} <= set(every)


def test_consecutive_chunks_of_a_section_overlap_and_sections_do_not() -> None:
    paragraphs = "\n\n".join(f"p{n} " + " ".join(f"t{n}_{k}" for k in range(9))
                             for n in range(12))
    text = f"# One\n\n{paragraphs}\n\n# Two\n\nlast words"
    chunks = chunk_document("o.md", text, "markdown", words, max_tokens=40,
                            overlap_tokens=12)
    one = [c for c in chunks if c.heading_path == ("One",)]
    assert len(one) >= 3
    for before, after in itertools.pairwise(one):
        last_paragraph = before.text.split("\n\n")[-1]
        assert after.text.startswith(last_paragraph)
    (two,) = [c for c in chunks if c.heading_path == ("Two",)]
    assert two.text == "last words"


def test_a_long_last_block_overlaps_by_its_last_words() -> None:
    long_block = " ".join(f"a{n}" for n in range(30))
    text = f"# S\n\n{long_block}\n\n" + " ".join(f"b{n}" for n in range(30))
    first, second = chunk_document("s.md", text, "markdown", words, max_tokens=40,
                                   overlap_tokens=5)
    assert first.text == long_block
    assert second.text.startswith("a25 a26 a27 a28 a29\n\nb0")
    assert second.token_count <= 40


def test_ids_are_stable_and_a_changed_section_changes_only_its_chunks() -> None:
    before = chunk_document("g.md", GUIDE, "markdown", words)
    again = chunk_document("g.md", GUIDE, "markdown", words)
    assert [c.content_hash for c in before] == [c.content_hash for c in again]
    changed = chunk_document("g.md", GUIDE.replace("Use pip.", "Use pip or uv."), "markdown",
                             words)
    assert len({c.content_hash for c in before} ^ {c.content_hash for c in changed}) == 2
    moved = {c.content_hash for c in before} - {c.content_hash for c in changed}
    assert [c.heading for c in before if c.content_hash in moved] == ["Install"]
    # Another document with the same text has other chunks.
    other = chunk_document("h.md", GUIDE, "markdown", words)
    assert not {c.content_hash for c in before} & {c.content_hash for c in other}


def test_the_same_content_twice_in_a_document_gives_two_ids() -> None:
    chunks = chunk_document("d.md", "# A\n\nsame\n\n# B\n\nx\n\n# A\n\nsame", "markdown", words)
    assert chunks[0].text == chunks[2].text and chunks[0].heading == chunks[2].heading
    assert len({c.content_hash for c in chunks}) == 3


def test_an_empty_document_has_no_chunk_and_overlap_must_be_small() -> None:
    assert chunk_document("e.md", "\n\n# Only a heading\n", "markdown", words) == []
    with pytest.raises(ValueError, match="overlap_tokens"):
        chunk_document("e.md", "x", "text", words, max_tokens=20, overlap_tokens=10)
