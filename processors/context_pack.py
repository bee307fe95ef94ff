"""Packing a context pack (seed 002's read path): the agent's core blocks first (seed 004),
then the candidates of each section, in the seed's order (history, long-term memory, then
documents),
into a token budget that is never exceeded.

Core blocks come first but take at most `CORE_SHARE` of the budget, so that retrieved
memories always keep the rest; what the blocks leave of their share goes to the sections.
A block is packed field by field (one line each, in the block's order): a field that does not
fit in what is left of the share is left out and named, never dropped unsaid, and a smaller
one after it may still fit.

Then greedy and in order: a section's candidates come best first; each is taken if it fits in
what is left of the budget and is not a near-duplicate of an item already taken (its
embedding's cosine to that item reaches `duplicate_similarity`); one that does not fit is
skipped, and a smaller one after it may still fit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

SECTIONS = ("history", "long_term", "documents")
DUPLICATE_SIMILARITY = 0.92
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
    created_at: str
    age_days: float
    score: float
    token_cost: int
    vector: NDArray[np.float32]


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
class Pack:
    core: CorePack
    items: list[Candidate]
    # Core blocks and items together.
    tokens: int
    # Candidates left out, by why: "budget" (did not fit), "duplicate" (near-duplicate).
    dropped: dict[str, int]


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
         duplicate_similarity: float = DUPLICATE_SIMILARITY) -> Pack:
    """The core blocks that fit in their share, then the candidates that fit in what is
    left, section by section in SECTIONS order, each section's in the order given."""
    if budget_tokens < 0:
        raise ValueError(f"budget_tokens must be >= 0, got {budget_tokens}")
    core = pack_core(core_blocks, budget_tokens)
    order = {section: index for index, section in enumerate(SECTIONS)}
    ordered = sorted(enumerate(candidates),
                     key=lambda item: (order.get(item[1].section, len(order)), item[0]))
    taken: list[Candidate] = []
    dropped = {"budget": 0, "duplicate": 0}
    left = budget_tokens - core.tokens
    for _, candidate in ordered:
        if any(float(np.dot(candidate.vector, kept.vector)) >= duplicate_similarity
               for kept in taken):
            dropped["duplicate"] += 1
        elif candidate.token_cost > left:
            dropped["budget"] += 1
        else:
            taken.append(candidate)
            left -= candidate.token_cost
    return Pack(core, taken, budget_tokens - left, dropped)
