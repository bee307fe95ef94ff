"""The cosine from which two gaps ask the same question (processors/recall/gaps.py), measured on
the labelled pairs of bench/data/gap_questions.jsonl.

    python -m bench.gap_grouping

Each pair is a question and either its paraphrase (`same`) or a different question of the
same shape that changes one thing (deploy to staging / to production). For each threshold:
how many paraphrases would share a group, and how many different questions would wrongly;
the one in use maximises the first minus the second (both as shares of their pairs). Also:
how many pairs the content-terms rule alone groups (it needs no model), and the highest
cosine between questions of different subjects (the pairs' first questions, each against
every other's), which a threshold must stay above.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from embedder.model import Embedder
from embedder.models import model_dir
from processors.recall.gaps import terms_key
from processors.text.calibration import SIMILARITY

# Questions are grouped by the similarity model (processors/text/calibration.py).
IN_USE = SIMILARITY.same_question
SIMILARITY_DIR = model_dir(SIMILARITY.model)

DATA = Path(__file__).resolve().parent / "data" / "gap_questions.jsonl"
THRESHOLDS = tuple(round(0.50 + 0.01 * step, 2) for step in range(46))


@dataclass(frozen=True)
class Pair:
    question: str
    other: str
    same: bool
    cosine: float


@dataclass(frozen=True)
class ThresholdScore:
    threshold: float
    paraphrases_grouped: int
    different_grouped: int


def measured_pairs(directory: Path = SIMILARITY_DIR) -> tuple[list[Pair], float]:
    """The labelled pairs with their cosines, and the highest cosine across subjects."""
    rows = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    with Embedder.load(directory) as embedder:
        pairs = []
        for row in rows:
            first, second = embedder.embed([row["question"], row["other"]], role="query")
            pairs.append(Pair(row["question"], row["other"], row["same"],
                              float(first @ second)))
        subjects = list(dict.fromkeys(pair.question for pair in pairs))
        vectors = embedder.embed(subjects, role="query")
    across = max(float(vectors[a] @ vectors[b])
                 for a, b in itertools.combinations(range(len(subjects)), 2))
    return pairs, across


def threshold_scores(pairs: Sequence[Pair]) -> list[ThresholdScore]:
    return [ThresholdScore(threshold,
                           sum(p.same and p.cosine >= threshold for p in pairs),
                           sum(not p.same and p.cosine >= threshold for p in pairs))
            for threshold in THRESHOLDS]


def best(scores: Sequence[ThresholdScore], paraphrases: int, different: int) -> ThresholdScore:
    """The threshold where grouped paraphrases minus wrongly grouped questions (as shares)
    peaks; the highest such, on a tie."""
    return max(scores, key=lambda s: (s.paraphrases_grouped / paraphrases
                                      - s.different_grouped / different, s.threshold))


def main() -> int:
    pairs, across = measured_pairs()
    paraphrases = sum(pair.same for pair in pairs)
    different = len(pairs) - paraphrases
    scores = threshold_scores(pairs)
    print(f"{'cosine':>6}  {'paraphrases grouped':>19}  {'different grouped':>17}")
    for score in scores:
        print(f"{score.threshold:>6.2f}  {score.paraphrases_grouped:>16}/{paraphrases}  "
              f"{score.different_grouped:>14}/{different}")
    for label, same in (("paraphrases", True), ("different questions", False)):
        cosines = sorted(pair.cosine for pair in pairs if pair.same is same)
        print(f"{label}: cosine {cosines[0]:.2f}-{cosines[-1]:.2f}, "
              f"median {cosines[len(cosines) // 2]:.2f}")
    by_terms = [pair for pair in pairs if terms_key(pair.question) == terms_key(pair.other)]
    print(f"same content terms: {sum(p.same for p in by_terms)}/{paraphrases} paraphrases, "
          f"{sum(not p.same for p in by_terms)}/{different} different questions")
    print(f"highest cosine between questions of different subjects: {across:.2f}")
    picked = best(scores, paraphrases, different)
    print(f"best threshold: {picked.threshold:.2f} ({picked.paraphrases_grouped}/"
          f"{paraphrases} paraphrases, {picked.different_grouped}/{different} different); "
          f"in use: {IN_USE:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
