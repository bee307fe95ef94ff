"""The cosine from which a new memory is its namespace's twin (issue 12: write-time
near-duplicates), picked on the labelled set.

    python -m bench.duplicate_threshold

Every pair of memories of bench/data/consolidation_eval.jsonl in one partition (the set has
one namespace; memory types partition it) is a candidate: a twin when its cosine reaches the
threshold and the twin rule (`processors.memory.twins.folds`: the consolidation guard's
values, speakers, questions, days, and no correction of one by the other) lets it through.
Scored against the pairs sharing a group, for each threshold; the one picked is the lowest
whose precision reaches TARGET_PRECISION. Also counted, at each threshold: the pairs of a fact
and its correction (`written:correction`, written in pairs, bench/data/README.md) folded,
each a correction lost from recall.

Cosines are the similarity model's (processors/text/calibration.py), which judges twins. In the
pipeline a pair reaches that judge only when the retrieval model (MEMSTREAM_MODEL) puts it at
its `twin_candidate` floor or above: `make bench`'s rows apply the floor too, and count the
twins it loses.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from bench.consolidation_eval import (
    EvalMemory,
    _embed,
    _true_pairs,
    candidates_of,
    load_eval_set,
)
from embedder.models import model_dir
from harness.stack import MODEL, MODEL_DIR
from processors.memory.twins import folds
from processors.text.calibration import SIMILARITY, calibration_of

IN_USE = SIMILARITY.twin
# The retrieval model's floor (harness.stack.MODEL, MEMSTREAM_MODEL).
CANDIDATE_FLOOR = calibration_of(MODEL.name).twin_candidate

TARGET_PRECISION = 0.97
THRESHOLDS = tuple(round(0.60 + 0.01 * step, 2) for step in range(40))


@dataclass(frozen=True)
class ThresholdScore:
    threshold: float
    twins: int
    precision: float
    recall: float
    # Pairs of a fact and its correction folded into one memory.
    corrections_folded: int


def threshold_scores(candidate_floor: float | None = None) -> list[ThresholdScore]:
    """The twins of each threshold of the similarity model; with `candidate_floor`, only of
    the pairs at that retrieval-model cosine or above, as the pipeline judges them."""
    memories = load_eval_set()
    candidates = candidates_of(memories)
    cosines = _cosines(memories, model_dir(SIMILARITY.model))
    retrieval = _cosines(memories, MODEL_DIR) if candidate_floor is not None else cosines
    floor = -1.0 if candidate_floor is None else candidate_floor
    truth, _ = _true_pairs(memories)
    corrections = correction_pairs(memories)
    # The later memory is the write: a correction is written after what it corrects.
    passing = [(a, b, float(cosines[a, b]))
               for a, b in itertools.combinations(range(len(memories)), 2)
               if retrieval[a, b] >= floor and folds(candidates[b], candidates[a])]
    scores = []
    for threshold in THRESHOLDS:
        twins = {(a, b) for a, b, cosine in passing if cosine >= threshold}
        hits = len(twins & truth)
        scores.append(ThresholdScore(threshold, len(twins),
                                     hits / len(twins) if twins else 1.0, hits / len(truth),
                                     len(twins & corrections)))
    return scores


def _cosines(memories: Sequence[EvalMemory], directory: Path) -> npt.NDArray[np.float32]:
    vectors = _embed(memories, directory)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cosines: npt.NDArray[np.float32] = unit @ unit.T
    return cosines


def correction_pairs(memories: Sequence[EvalMemory]) -> set[tuple[int, int]]:
    """The pairs of a fact and its correction: the ungrouped `written:correction` memories,
    written in pairs, the fact first."""
    written = [index for index, memory in enumerate(memories)
               if memory.source == "written:correction" and memory.group is None]
    return set(zip(written[::2], written[1::2], strict=True))


def picked(scores: Sequence[ThresholdScore]) -> ThresholdScore:
    return next(score for score in scores if score.precision >= TARGET_PRECISION)


def duplicate_rows() -> list[tuple[str, str, str]]:
    """`make bench`'s rows: the precision and recall at the threshold in use, of the pairs
    that reach the judge."""
    judged = next(score for score in threshold_scores() if score.threshold == IN_USE)
    used = next(score for score in threshold_scores(CANDIDATE_FLOOR)
                if score.threshold == IN_USE)
    return [
        (f"write-time twins at cosine {used.threshold:.2f} ({SIMILARITY.model}): pair "
         "precision", f"{used.precision:.3f}", f">= {TARGET_PRECISION}"),
        ("write-time twins: pair recall", f"{used.recall:.3f}", ""),
        (f"write-time twins lost under {MODEL.name}'s candidate floor "
         f"{CANDIDATE_FLOOR:.2f}", str(judged.twins - used.twins), "0"),
        ("write-time twins: corrections folded into what they correct",
         str(used.corrections_folded), "0"),
    ]


def main() -> int:
    scores = threshold_scores()
    print(f"{'cosine':>6}  {'twins':>5}  {'precision':>9}  {'recall':>6}  "
          f"{'corrections folded':>18}")
    for score in scores:
        print(f"{score.threshold:>6.2f}  {score.twins:>5}  {score.precision:>9.3f}  "
              f"{score.recall:>6.3f}  {score.corrections_folded:>18}")
    best = picked(scores)
    print(f"lowest cosine with precision >= {TARGET_PRECISION}: {best.threshold:.2f} "
          f"(recall {best.recall:.3f}); in use: {IN_USE:.2f}, corrections folded "
          f"{next(s for s in scores if s.threshold == IN_USE).corrections_folded} of "
          f"{len(correction_pairs(load_eval_set()))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
