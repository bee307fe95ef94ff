"""Packing a context pack (seed 002's read path): candidates of each section, in the seed's
order (history, then long-term memory), into a token budget that is never exceeded.

Greedy and in order: a section's candidates come best first; each is taken if it fits in what
is left of the budget and is not a near-duplicate of an item already taken (its embedding's
cosine to that item reaches `duplicate_similarity`); one that does not fit is skipped, and a
smaller one after it may still fit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

SECTIONS = ("history", "long_term")
DUPLICATE_SIMILARITY = 0.92


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
class Pack:
    items: list[Candidate]
    tokens: int
    # Candidates left out, by why: "budget" (did not fit), "duplicate" (near-duplicate).
    dropped: dict[str, int]


def pack(candidates: Sequence[Candidate], budget_tokens: int,
         duplicate_similarity: float = DUPLICATE_SIMILARITY) -> Pack:
    """The candidates that fit, section by section in SECTIONS order, each section's in the
    order given."""
    if budget_tokens < 0:
        raise ValueError(f"budget_tokens must be >= 0, got {budget_tokens}")
    order = {section: index for index, section in enumerate(SECTIONS)}
    ordered = sorted(enumerate(candidates),
                     key=lambda item: (order.get(item[1].section, len(order)), item[0]))
    taken: list[Candidate] = []
    dropped = {"budget": 0, "duplicate": 0}
    left = budget_tokens
    for _, candidate in ordered:
        if any(float(np.dot(candidate.vector, kept.vector)) >= duplicate_similarity
               for kept in taken):
            dropped["duplicate"] += 1
        elif candidate.token_cost > left:
            dropped["budget"] += 1
        else:
            taken.append(candidate)
            left -= candidate.token_cost
    return Pack(taken, budget_tokens - left, dropped)
