"""The cosine from which a new memory is its namespace's twin (issue 12: write-time
near-duplicates), picked on the labelled set.

    python -m bench.duplicate_threshold

Every pair of memories of bench/data/consolidation_eval.jsonl in one partition (the set has
one namespace; memory types partition it) is a candidate: a twin when its cosine reaches the
threshold and the consolidation guard (`processors.consolidation.restates`: values,
speakers, questions, days) lets it through. Scored against the pairs sharing a group, for
each threshold; the one picked is the lowest whose precision reaches TARGET_PRECISION.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bench.consolidation_eval import _embed, _true_pairs, candidates_of, load_eval_set
from embedder.build import DEFAULT_OUT
from processors.consolidation.restatements import restates
from processors.memory.twins import DUPLICATE_COSINE

TARGET_PRECISION = 0.97
THRESHOLDS = tuple(round(0.60 + 0.01 * step, 2) for step in range(40))


@dataclass(frozen=True)
class ThresholdScore:
    threshold: float
    twins: int
    precision: float
    recall: float


def threshold_scores() -> list[ThresholdScore]:
    memories = load_eval_set()
    candidates = candidates_of(memories)
    vectors = _embed(memories, DEFAULT_OUT)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cosines = unit @ unit.T
    truth, _ = _true_pairs(memories)
    passing = [(a, b, float(cosines[a, b]))
               for a, b in itertools.combinations(range(len(memories)), 2)
               if restates(candidates[a], candidates[b])]
    scores = []
    for threshold in THRESHOLDS:
        twins = {(a, b) for a, b, cosine in passing if cosine >= threshold}
        hits = len(twins & truth)
        scores.append(ThresholdScore(threshold, len(twins),
                                     hits / len(twins) if twins else 1.0, hits / len(truth)))
    return scores


def picked(scores: Sequence[ThresholdScore]) -> ThresholdScore:
    return next(score for score in scores if score.precision >= TARGET_PRECISION)


def duplicate_rows() -> list[tuple[str, str, str]]:
    """`make bench`'s rows: the precision and recall at the threshold in use."""
    scores = {score.threshold: score for score in threshold_scores()}
    used = scores[DUPLICATE_COSINE]
    return [
        (f"write-time twins at cosine {used.threshold:.2f}: pair precision",
         f"{used.precision:.3f}", f">= {TARGET_PRECISION}"),
        ("write-time twins: pair recall", f"{used.recall:.3f}", ""),
    ]


def main() -> int:
    scores = threshold_scores()
    print(f"{'cosine':>6}  {'twins':>5}  {'precision':>9}  {'recall':>6}")
    for score in scores:
        print(f"{score.threshold:>6.2f}  {score.twins:>5}  {score.precision:>9.3f}  "
              f"{score.recall:>6.3f}")
    best = picked(scores)
    print(f"lowest cosine with precision >= {TARGET_PRECISION}: {best.threshold:.2f} "
          f"(recall {best.recall:.3f}); in use: {DUPLICATE_COSINE:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
