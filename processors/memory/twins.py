"""Write-time near-duplicates (seeds 001, 003): a new memory that restates a live one of its
namespace (same scope, owner, kind and type) updates it instead of adding a twin.

A twin is the nearest such memory at or above the embedding model's twin cosine (measured by
`python -m bench.duplicate_threshold`: processors/text/calibration.py) that the consolidation
guard lets through (values, names, speakers, questions and days must agree, and neither may say
that something changed where the other does not: processors/consolidation/restatements.py) and
that neither
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
from processors.text.calibration import SIMILARITY


@dataclass(frozen=True)
class Twin:
    record_id: str
    cosine: float


def twin_of(memory: ConsolidationCandidate,
            neighbours: Sequence[tuple[ConsolidationCandidate, float]],
            threshold: float = SIMILARITY.twin) -> Twin | None:
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
