"""Write-time near-duplicates (seeds 001, 003): a new memory that restates a live one of its
namespace (same scope, owner, kind and type) updates it instead of adding a twin.

A twin is the nearest such memory at or above DUPLICATE_COSINE that the consolidation guard lets
through (values, names, speakers, questions and days must agree, and neither may say that something
changed where the other does not: processors/consolidation/restatements.py) and that neither
corrects by the stale-fact rule (processors/knowledge/stale_facts.py). A correction is never
folded into what it corrects: it is stored as a memory of its own, and the stale-fact finder
invalidates what it corrects a tick later.
The twin keeps its text; the write becomes a version of it that records the restatement (`restated`,
processors/memory/lifecycle.py): the provenance of both events, nothing lost, and the words only
the restatement holds still find the twin (processors/text/lexical.py). The worker looks for
twins unless MEMSTREAM_TWIN_COSINE=off (streams/plumbing/config.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from processors.consolidation.candidates import ConsolidationCandidate
from processors.consolidation.restatements import restates
from processors.knowledge.stale_facts import changed

# Picked on bench/data/consolidation_eval.jsonl by `python -m bench.duplicate_threshold`,
# among the pairs the twin rule lets through (`folds`): 0.78 is the lowest cosine at
# duplicate-pair precision 0.97 (0.974, recall 0.689), with no margin; 0.82 has one (0.987,
# recall 0.601), and folds none of the set's 30 corrections into what they correct (2 with
# the guard before issue 37, at 0.983 / 0.601). (Before the guard's negation rule, with the
# negation pairs of issue 18 in the set, 0.82 gave 0.945: a fact and its negation were twins.)
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
             and folds(memory, neighbour)]
    if not found:
        return None
    cosine, record_id = max(found)
    return Twin(record_id, cosine)


def folds(memory: ConsolidationCandidate, neighbour: ConsolidationCandidate) -> bool:
    """Whether `memory`, close enough to `neighbour`, may become a version of it: the guard
    lets the two be one fact restated, and neither changes a value of the other by the
    stale-fact rule, whichever is the newer (a write may correct a memory, or repeat what a
    later memory corrected)."""
    return restates(memory, neighbour) and changed(neighbour.text, memory.text) is None \
        and changed(memory.text, neighbour.text) is None
