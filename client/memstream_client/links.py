"""Wiki links in a memory's text: what the worker reads as its links (the graph, the browser),
and the closing line the SDK writes for a write's `links=`."""

from __future__ import annotations

import re
from collections.abc import Collection

WIKI_LINK = re.compile(r"\[\[([^\[\]|#]{1,200})(?:[#|][^\[\]]*)?\]\]")


def wiki_links(text: str) -> list[str]:
    """Targets of `[[Page]]`, `[[Page|label]]` and `[[Page#section]]` links, in order, once."""
    return list(dict.fromkeys(match.strip() for match in WIKI_LINK.findall(text)))


def linked_text(text: str, links: Collection[str]) -> str:
    """`text` with a closing line of `[[links]]` to the memories it names (titles or record
    ids) that it does not link already, so that its wiki links are all of them."""
    present = set(wiki_links(text))
    targets = list(dict.fromkeys(link.strip() for link in links))
    for target in targets:
        if not 0 < len(target) <= 200 or any(mark in target for mark in "[]|#"):
            raise ValueError(f"not a link target: {target!r} (1 to 200 characters, "
                             "no brackets, | or #)")
    missing = [target for target in targets if target not in present]
    if not missing:
        return text
    return f"{text.rstrip()}\n\nLinks: " + " ".join(f"[[{target}]]" for target in missing)
