"""What a cosine of each embedding model means: every threshold that reads one, per model.

Two models put the same pair of texts at very different cosines: unrelated prose sits around
0.12 with all-MiniLM-L6-v2 and around 0.8 with e5-small-v2, whose paraphrases sit at 0.86 to
0.96. A threshold is therefore the model's, never a constant of the rule that reads it.

Two models serve two questions. The retrieval model (MEMSTREAM_MODEL) finds what a query
asks for; its `Calibration` holds the thresholds of search, relevance, stale facts and the
context pack. Whether two texts say the same thing (twins, gap questions, consolidation) is
judged by one similarity model, all-MiniLM-L6-v2, whatever the retrieval model: e5-small-v2
retrieves better and tells a paraphrase from another fact on the same subject worse
(consolidation recall 0.42 against 0.79 at the same precision, docs/retrieval.md#calibration).
`SIMILARITY` holds its thresholds; a retrieval model's `twin_candidate` is the floor from which
its nearest memories are handed to the similarity model to judge.

Each value below was measured on text that is not the retrieval benchmark's, by the command
named beside it (docs/retrieval.md#calibration has the figures of both models):

- the labelled sweeps pick a threshold by the rule's own target: twins and their candidate
  floor (`bench.duplicate_threshold`), stale facts (`bench.invalidation_eval --sweep`), gap
  questions (`bench.gap_grouping`), consolidation (`bench.consolidation_eval`);
- the scales without a labelled target keep their meaning across models
  (`bench.calibration`): relevance's "unrelated" anchor sits at the same percentile of the
  cosines of unrelated prose sentences (query against stored text), its "same subject" anchor
  as far between that and the lowest paraphrase, and the context pack's near-duplicate bar
  lets through as many distinct pairs of the consolidation set as MiniLM's did.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Calibration:
    """The cosine thresholds of one retrieval model."""

    model: str
    # Hybrid search's weight of the dense list (the lexical one gets the rest):
    # processors/recall/ranking.py, measured by `python -m bench.retrieval_eval`.
    dense_weight: float
    # Relevance (processors/recall/ranking.py): a query-to-record cosine at or below
    # `dense_unrelated` says nothing in common, at or above `dense_same_subject` the same
    # subject; dense support grows linearly between them.
    dense_unrelated: float
    dense_same_subject: float
    # A newer memory at least this close to an older one with another value invalidates it
    # (processors/knowledge/stale_facts.py).
    stale: float
    # The context pack drops an item at least this close to one already taken
    # (processors/recall/context_pack.py).
    pack_duplicate: float
    # A new memory's nearest live memories at least this close are its twin candidates,
    # judged by the similarity model: the lowest cosine of this model that a pair the
    # similarity model calls twins reaches, on the labelled set.
    twin_candidate: float

    def __post_init__(self) -> None:
        if not self.dense_unrelated < self.dense_same_subject:
            raise ValueError("dense_unrelated must lie below dense_same_subject")
        if not 0.0 <= self.dense_weight <= 1.0:
            raise ValueError("dense_weight lies in [0, 1]")


@dataclass(frozen=True)
class SimilarityCalibration:
    """The cosine thresholds of the similarity model: from where two texts say one thing."""

    model: str
    # A new memory at least this close to a live one it restates updates it
    # (processors/memory/twins.py).
    twin: float
    # Two gaps at least this close ask the same question (processors/recall/gaps.py).
    same_question: float
    # Consolidation's guard and local scaling (processors/consolidation/candidates.py).
    consolidation_medoid: float
    consolidation_mean: float
    consolidation_reference: float


MINILM = Calibration(
    model="all-MiniLM-L6-v2",
    dense_weight=0.4,
    dense_unrelated=0.2,
    dense_same_subject=0.6,
    stale=0.57,
    pack_duplicate=0.92,
    # The similarity model itself: its candidates are its twins.
    twin_candidate=0.82,
)

E5_SMALL_V2 = Calibration(
    model="e5-small-v2",
    dense_weight=0.5,
    dense_unrelated=0.772,
    dense_same_subject=0.835,
    stale=0.81,
    pack_duplicate=0.96,
    # The similarity model's twins of the labelled set reach 0.865 and more.
    twin_candidate=0.85,
)

# The similarity model (embedder.models.SIMILARITY_MODEL; a test holds the two together).
SIMILARITY = SimilarityCalibration(
    model="all-MiniLM-L6-v2",
    twin=0.82,
    same_question=0.73,
    consolidation_medoid=0.70,
    consolidation_mean=0.69,
    consolidation_reference=0.60,
)

CALIBRATIONS: Mapping[str, Calibration] = {c.model: c for c in (MINILM, E5_SMALL_V2)}
# The default model's (embedder.models.DEFAULT_MODEL; a test holds the two together): what a
# rule applies when its caller names no threshold, as the pure rules' tests do.
DEFAULT_CALIBRATION = E5_SMALL_V2


def calibration_of(model: str) -> Calibration:
    """The thresholds measured for the named model; a model never measured has none, and
    guessing them would make every threshold silently wrong."""
    try:
        return CALIBRATIONS[model]
    except KeyError:
        raise ValueError(f"no calibration for embedding model {model!r}: measure it first "
                         f"(processors/text/calibration.py); calibrated: "
                         f"{', '.join(sorted(CALIBRATIONS))}") from None
