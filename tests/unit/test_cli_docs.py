"""What `memstream docs sync` finds under a directory (memstream_client/cli/docs.py)."""

from __future__ import annotations

from pathlib import Path

from memstream_client.cli.docs import local_documents
from memstream_client.events import MAX_DOCUMENT_CHARS


def test_documents_are_the_markdown_and_text_files_named_by_their_relative_path(
    tmp_path: Path,
) -> None:
    (tmp_path / "guide" / "deep").mkdir(parents=True)
    (tmp_path / "guide" / "install.md").write_text("intro\n\n# Install\n\nUse pip.\n")
    (tmp_path / "guide" / "deep" / "notes.markdown").write_text("## Only a second level\n")
    (tmp_path / "readme.TXT").write_text("# not a title in plain text\n")
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    (tmp_path / "latin.md").write_bytes("caf\xe9".encode("latin-1"))
    (tmp_path / "empty.txt").write_text("  \n")
    (tmp_path / "huge.md").write_text("x" * (MAX_DOCUMENT_CHARS + 1))
    found, skipped = local_documents(tmp_path)
    assert [(d.doc_id, d.content_type, d.title) for d in found] == [
        ("guide/deep/notes.markdown", "markdown", None),
        ("guide/install.md", "markdown", "Install"),
        ("readme.TXT", "text", None)]
    assert found[1].text == "intro\n\n# Install\n\nUse pip.\n"
    assert skipped == ["empty.txt: empty",
                       f"huge.md: {MAX_DOCUMENT_CHARS + 1} characters, over {MAX_DOCUMENT_CHARS}",
                       "latin.md: not UTF-8"]
