"""Write-time near-duplicates (seeds 001, 003): a new memory that restates a live one of its
namespace (same scope, owner, kind and type) updates it instead of adding a twin.

A twin is the nearest such memory at or above DUPLICATE_COSINE that the consolidation guard lets
through (values, speakers, questions and days must agree: processors/consolidation/restatements.py).
The twin keeps its text; the write becomes a version of it that records the restatement (`restated`,
processors/memory/lifecycle.py): the provenance of both events, nothing lost. The worker looks for
twins unless MEMSTREAM_TWIN_COSINE=off (streams/plumbing/config.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from processors.consolidation.candidates import ConsolidationCandidate
from processors.consolidation.restatements import restates

# Picked on bench/data/consolidation_eval.jsonl by `python -m bench.duplicate_threshold`,
# among the pairs the guard lets through: 0.77 is the lowest cosine at duplicate-pair
# precision 0.97 (0.970, recall 0.702), with no margin; 0.82 has one (0.987, recall 0.594).
# (Before the guard's negation rule, with the negation pairs of issue 18 in the set, 0.82
# gave 0.945: a fact and its negation were twins.)
# A false twin hides a fact in another memory's history, a missed one leaves a duplicate that
# consolidation may still merge: the margin is worth the recall.
DUPLICATE_COSINE = 0.82


@dataclass(frozen=True)
class Twin:
    record_id: str
    cosine: float


def twin_of(memory: ConsolidationCandidate,
            neighbours: Sequence[tuple[ConsolidationCandidate, float]],
            threshold: float = DUPLICATE_COSINE) -> Twin | None:
    """The nearest neighbour (candidate, cosine) that `memory` restates, if any."""
    found = [(cosine, neighbour.record_id) for neighbour, cosine in neighbours
             if cosine >= threshold and neighbour.record_id != memory.record_id
             and restates(memory, neighbour)]
    if not found:
        return None
    cosine, record_id = max(found)
    return Twin(record_id, cosine)
