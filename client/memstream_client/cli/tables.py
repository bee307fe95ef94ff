"""Plain text for people: aligned columns cut to the terminal's width, one line per row, and
a row's text (a memory's, a version's) on its own lines under it, wrapped to the width, so
that the text has the whole line however many columns its row has."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from datetime import datetime

ELLIPSIS = "…"
GAP = "  "
# A column is never cut narrower than this (or its header, if shorter).
MIN_COLUMN = 8
# A row's text is indented under it, and shown in at most so many lines (--json has it all).
TEXT_INDENT = "    "
TEXT_LINES = 4
_SPACES = re.compile(r"\s+")


def cell(value: object) -> str:
    """A value on one line: None as '-', lists joined, floats to three places."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, list | tuple):
        return ", ".join(cell(item) for item in value) or "-"
    return _SPACES.sub(" ", str(value)).strip()


def truncate(text: str, width: int) -> str:
    """`text` in at most `width` characters, ending with '…' when cut."""
    if width <= 0:
        return ""
    if len(text) <= width:
        return text
    return text[: width - 1] + ELLIPSIS


def column_widths(natural: Sequence[int], width: int, flexible: Sequence[int]) -> list[int]:
    """Each column's width: its natural one, the widest of the `flexible` ones (indexes) cut
    first until the row fits in `width`, none below `MIN_COLUMN`. The others (ids, times,
    numbers) are never cut: a line that cannot fit without cutting them is left longer."""
    widths = list(natural)
    cuttable = sorted({i % len(widths) for i in flexible}) if widths else []
    floors = [min(n, MIN_COLUMN) for n in natural]
    excess = sum(widths) + len(GAP) * (len(widths) - 1) - width
    while excess > 0:
        candidates = [i for i in cuttable if widths[i] > floors[i]]
        if not candidates:
            break
        widest = max(candidates, key=lambda i: widths[i])
        next_widest = max([widths[i] for i in candidates if i != widest] + [floors[widest]])
        # Down to the next widest column at once, or by the excess if that is less.
        step = min(excess, widths[widest] - next_widest or 1)
        widths[widest] -= step
        excess -= step
    return widths


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], width: int,
          flexible: Sequence[int] = (-1,), texts: Sequence[object] = ()) -> str:
    """Rows under their headers, columns aligned, the `flexible` ones (by default the last)
    cut so that a line fits in `width` characters; the text of each row, when `texts` has
    one per row, under it (`wrapped`)."""
    cells = [[cell(value) for value in row] for row in rows]
    natural = [max([len(header), *(len(row[i]) for row in cells)])
               for i, header in enumerate(headers)]
    widths = column_widths(natural, width, flexible)
    lines = [aligned(headers, widths)]
    for i, row in enumerate(cells):
        lines += [aligned(row, widths), *(wrapped(texts[i], width) if texts else [])]
    return "\n".join(lines)


def prose(text: str, width: int) -> str:
    """Text shown whole, each of its lines wrapped to `width`."""
    return "\n".join(textwrap.fill(part, max(width, MIN_COLUMN)) if part.strip() else ""
                     for part in text.splitlines())


def wrapped(text: object, width: int) -> list[str]:
    """A row's text under it: on one line, indented, wrapped to `width`, in at most
    `TEXT_LINES` lines, the last ending with '…' when cut."""
    return textwrap.wrap(cell(text) if text is not None else "",
                         max(width, len(TEXT_INDENT) + MIN_COLUMN), max_lines=TEXT_LINES,
                         initial_indent=TEXT_INDENT, subsequent_indent=TEXT_INDENT,
                         placeholder=f" {ELLIPSIS}")


def when(moment: datetime | None) -> str | None:
    """A time to the second, as a table shows it (in its zone as given: UTC here)."""
    return None if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S")


def aligned(values: Sequence[str], widths: Sequence[int]) -> str:
    """One row: each value cut to its column's width, the columns aligned."""
    return GAP.join(truncate(value, w).ljust(w) for value, w in zip(values, widths, strict=True)
                    ).rstrip()


def fields(pairs: Sequence[tuple[str, object]], width: int) -> str:
    """`name: value` lines, names aligned, a long value wrapped under itself."""
    pad = max((len(name) for name, _ in pairs), default=0) + 2
    return "\n".join(
        textwrap.fill(f"{name + ':':<{pad}}{cell(value)}", max(width, pad + MIN_COLUMN),
                      subsequent_indent=" " * pad)
        for name, value in pairs)
