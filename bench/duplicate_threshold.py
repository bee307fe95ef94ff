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
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bench.consolidation_eval import (
    EvalMemory,
    _embed,
    _true_pairs,
    candidates_of,
    load_eval_set,
)
from harness.stack import MODEL, MODEL_DIR
from processors.memory.twins import folds
from processors.text.calibration import calibration_of

# The threshold in use for the model measured (harness.stack.MODEL, MEMSTREAM_MODEL).
IN_USE = calibration_of(MODEL.name).twin

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


def threshold_scores() -> list[ThresholdScore]:
    memories = load_eval_set()
    candidates = candidates_of(memories)
    vectors = _embed(memories, MODEL_DIR)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cosines = unit @ unit.T
    truth, _ = _true_pairs(memories)
    corrections = correction_pairs(memories)
    # The later memory is the write: a correction is written after what it corrects.
    passing = [(a, b, float(cosines[a, b]))
               for a, b in itertools.combinations(range(len(memories)), 2)
               if folds(candidates[b], candidates[a])]
    scores = []
    for threshold in THRESHOLDS:
        twins = {(a, b) for a, b, cosine in passing if cosine >= threshold}
        hits = len(twins & truth)
        scores.append(ThresholdScore(threshold, len(twins),
                                     hits / len(twins) if twins else 1.0, hits / len(truth),
                                     len(twins & corrections)))
    return scores


def correction_pairs(memories: Sequence[EvalMemory]) -> set[tuple[int, int]]:
    """The pairs of a fact and its correction: the ungrouped `written:correction` memories,
    written in pairs, the fact first."""
    written = [index for index, memory in enumerate(memories)
               if memory.source == "written:correction" and memory.group is None]
    return set(zip(written[::2], written[1::2], strict=True))


def picked(scores: Sequence[ThresholdScore]) -> ThresholdScore:
    return next(score for score in scores if score.precision >= TARGET_PRECISION)


def duplicate_rows() -> list[tuple[str, str, str]]:
    """`make bench`'s rows: the precision and recall at the threshold in use."""
    scores = {score.threshold: score for score in threshold_scores()}
    used = scores[IN_USE]
    return [
        (f"write-time twins at cosine {used.threshold:.2f}: pair precision",
         f"{used.precision:.3f}", f">= {TARGET_PRECISION}"),
        ("write-time twins: pair recall", f"{used.recall:.3f}", ""),
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
