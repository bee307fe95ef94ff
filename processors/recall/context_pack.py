"""Packing a context pack (seed 002's read path): the agent's core blocks first (seed 004),
then the candidates of each section in the seed's order (planning, history, long-term memory,
documents), into a token budget that is never exceeded.

Core blocks come first but take at most `CORE_SHARE` of the budget, so that retrieved
memories always keep the rest; what the blocks leave of their share goes to the sections.
A block is packed field by field (one line each, in the block's order): a field that does not
fit in what is left of the share is left out and named, never dropped unsaid, and a smaller
one after it may still fit.

What the core leaves is shared between the sections (`DEFAULT_SHARES`, configurable): each
section's candidates come best first and each is taken if it fits in its section's room and
is not a near-duplicate of an item already taken (its embedding's cosine to that item reaches
`duplicate_similarity`); one that does not fit is set aside, and a smaller one after it may
still fit. A section's room is its share plus what the sections before it left unused, so a
section with little to say passes its share on; what is left once every section had its turn
goes to the candidates set aside, in section order. So no section crowds out the others, and
no token of the budget stays unused while a candidate would fit.

A contested memory (its invalidation waits for a reviewer: processors/recall/contested.py)
comes with a line that says so (`Pack.notes`), whose tokens its caller counts in the item's
cost, so that the budget holds with the line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray

from processors.recall.contested import Contest, note
from processors.text.calibration import DEFAULT_CALIBRATION

SECTIONS = ("planning", "history", "long_term", "documents")
# Each section's share of what the core blocks leave of the budget.
DEFAULT_SHARES: Mapping[str, float] = {"planning": 0.15, "history": 0.25, "long_term": 0.40,
                                       "documents": 0.20}
# The most of the budget core blocks may take: retrieved memories keep at least the rest.
CORE_SHARE = 0.5


@dataclass(frozen=True)
class Candidate:
    section: str
    record_id: str
    kind: str
    text: str
    source: str
    trust_class: str
    provenance: Mapping[str, Any]
    created_at: datetime
    age_days: float
    score: float
    # What it takes of the budget: its text, and its note when it is contested.
    token_cost: int
    vector: NDArray[np.float32]
    # The correction of it that waits for a reviewer, and those of others it is.
    contested: Contest | None = None
    corrects: tuple[Contest, ...] = ()

    @property
    def note(self) -> str | None:
        """The line the pack carries for it: that it is contested, by what."""
        return None if self.contested is None else note(self.contested)


@dataclass(frozen=True)
class CoreField:
    """One field of a core block: its line as the agent sees it, and what the line costs."""

    name: str
    line: str
    token_cost: int


@dataclass(frozen=True)
class CoreBlock:
    label: str
    version: int
    fields: tuple[CoreField, ...]


@dataclass(frozen=True)
class PackedBlock:
    label: str
    version: int
    kept: tuple[CoreField, ...]
    # The names of the fields that did not fit in the core's share of the budget.
    left_out: tuple[str, ...]

    @property
    def text(self) -> str:
        return "\n".join(field.line for field in self.kept)

    @property
    def token_cost(self) -> int:
        return sum(field.token_cost for field in self.kept)


@dataclass(frozen=True)
class CorePack:
    blocks: list[PackedBlock]
    tokens: int
    # The most the blocks could take: CORE_SHARE of the budget.
    share_tokens: int

    @property
    def truncated(self) -> bool:
        return any(block.left_out for block in self.blocks)


@dataclass(frozen=True)
class SectionUse:
    """What one section was given of the budget and what it took."""

    # Its share of what the core blocks left.
    share_tokens: int
    # What its items cost, and how many there are.
    tokens: int
    items: int


@dataclass(frozen=True)
class Pack:
    core: CorePack
    items: list[Candidate]
    # Core blocks and items together.
    tokens: int
    # Candidates left out, by why: "budget" (did not fit), "duplicate" (near-duplicate).
    dropped: dict[str, int]
    # Every section of SECTIONS, in order.
    sections: dict[str, SectionUse]

    @property
    def notes(self) -> list[str]:
        """The lines of the items packed that are contested, in the pack's order."""
        return [item.note for item in self.items if item.note is not None]


def shares_of(text: str) -> dict[str, float]:
    """Section shares from `planning=0.2,history=0.3,...`: sections of SECTIONS, each at most
    once, each a number in [0, 1], the sections not named keeping their default; scaled to
    sum to 1 when packing. ValueError, saying what is wrong, for anything else."""
    shares = dict(DEFAULT_SHARES)
    named: set[str] = set()
    for item in filter(None, (part.strip() for part in text.split(","))):
        section, sep, raw = item.partition("=")
        section = section.strip()
        if not sep or section not in SECTIONS:
            raise ValueError(f"not a section share: {item!r} (section=share, the sections "
                             f"being {', '.join(SECTIONS)})")
        if section in named:
            raise ValueError(f"{section}: given twice")
        try:
            share = float(raw)
        except ValueError:
            raise ValueError(f"{section}: not a number: {raw.strip()!r}") from None
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"{section}: a share is in [0, 1], got {share}")
        named.add(section)
        shares[section] = share
    if sum(shares.values()) <= 0:
        raise ValueError("the shares are all 0: no section would get any of the budget")
    return shares


def section_shares(room: int, shares: Mapping[str, float]) -> dict[str, int]:
    """`room` tokens split between SECTIONS in proportion to their shares (rounded down)."""
    total = sum(max(0.0, shares.get(section, 0.0)) for section in SECTIONS)
    if total <= 0:
        raise ValueError("the shares are all 0: no section would get any of the budget")
    return {section: int(room * max(0.0, shares.get(section, 0.0)) / total)
            for section in SECTIONS}


def core_share(budget_tokens: int) -> int:
    return int(budget_tokens * CORE_SHARE)


def pack_core(blocks: Sequence[CoreBlock], budget_tokens: int) -> CorePack:
    """The blocks' fields that fit in the core's share of the budget, blocks and fields in
    the order given; every block is in the answer, whatever of it was left out."""
    share = core_share(budget_tokens)
    left = share
    packed = []
    for block in blocks:
        kept, left_out = [], []
        for field in block.fields:
            if field.token_cost <= left:
                kept.append(field)
                left -= field.token_cost
            else:
                left_out.append(field.name)
        packed.append(PackedBlock(block.label, block.version, tuple(kept), tuple(left_out)))
    return CorePack(packed, share - left, share)


def pack(candidates: Sequence[Candidate], budget_tokens: int,
         core_blocks: Sequence[CoreBlock] = (),
         duplicate_similarity: float = DEFAULT_CALIBRATION.pack_duplicate,
         shares: Mapping[str, float] = DEFAULT_SHARES) -> Pack:
    """The core blocks that fit in their share, then the candidates of each section that fit
    in its room, in SECTIONS order, each section's in the order given, then those set aside
    that fit in what is left (see the module docstring). A candidate of a section not in
    SECTIONS only gets what is left at the end."""
    if budget_tokens < 0:
        raise ValueError(f"budget_tokens must be >= 0, got {budget_tokens}")
    core = pack_core(core_blocks, budget_tokens)
    allotted = section_shares(budget_tokens - core.tokens, shares)
    order = {section: index for index, section in enumerate(SECTIONS)}
    ordered = sorted(enumerate(candidates),
                     key=lambda item: (order.get(item[1].section, len(order)), item[0]))
    taken: list[tuple[int, Candidate]] = []
    set_aside: list[tuple[int, Candidate]] = []
    dropped = {"budget": 0, "duplicate": 0}
    # The vectors of the items taken, a row each in taking order: one product a candidate,
    # not one a pair.
    taken_vectors = np.empty((len(candidates), len(candidates[0].vector) if candidates else 0),
                             dtype=np.float32)

    def duplicate(candidate: Candidate) -> bool:
        return bool(taken) and \
            float(np.max(taken_vectors[:len(taken)] @ candidate.vector)) >= duplicate_similarity

    def take(position: int, candidate: Candidate) -> None:
        taken_vectors[len(taken)] = candidate.vector
        taken.append((position, candidate))

    carried = 0
    for section in SECTIONS:
        room = carried + allotted[section]
        for position, candidate in ordered:
            if candidate.section != section:
                continue
            if duplicate(candidate):
                dropped["duplicate"] += 1
            elif candidate.token_cost > room:
                set_aside.append((position, candidate))
            else:
                take(position, candidate)
                room -= candidate.token_cost
        carried = room
    set_aside += [(position, candidate) for position, candidate in ordered
                  if candidate.section not in order]
    left = budget_tokens - core.tokens - sum(item.token_cost for _, item in taken)
    for position, candidate in set_aside:
        if duplicate(candidate):
            dropped["duplicate"] += 1
        elif candidate.token_cost > left:
            dropped["budget"] += 1
        else:
            take(position, candidate)
            left -= candidate.token_cost
    items = [item for _, item in sorted(
        taken, key=lambda kept: (order.get(kept[1].section, len(order)), kept[0]))]
    used = {section: [item for item in items if item.section == section]
            for section in SECTIONS}
    return Pack(core, items, budget_tokens - left, dropped,
                {section: SectionUse(allotted[section],
                                     sum(item.token_cost for item in used[section]),
                                     len(used[section]))
                 for section in SECTIONS})
