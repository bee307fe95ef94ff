"""Dense-only retrieval on the development split, one model against another (issue 39).

    python -m bench.model_compare [DATA]

Every model of embedder.models, int8, as ``python -m embedder.build --model NAME`` builds it
(e5-small-v2 with its prefixes: without them it measured R@5 0.551); R@k as in
bench.retrieval_eval, and texts/s on one lane.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from bench.retrieval_eval import DATA_FILE, TOP_K, Question, load_conversations, ranking, recall
from embedder.model import Embedder
from embedder.models import MODELS, model_dir


def main(argv: list[str]) -> int:
    convs = load_conversations(Path(argv[0]) if argv else DATA_FILE)
    for name in MODELS:
        qs: list[Question] = []
        ranks: list[list[str]] = []
        n, secs = 0, 0.0
        with Embedder.load(model_dir(name), "int8", threads=1) as embedder:
            for c in convs:
                questions = [q for q in c.questions if q.evidence]
                if not questions:
                    continue
                t0 = time.perf_counter()
                turn_vectors = embedder.embed([t.text for t in c.turns], role="passage")
                question_vectors = embedder.embed([q.text for q in questions], role="query")
                secs += time.perf_counter() - t0
                n += len(c.turns) + len(questions)
                for q, v in zip(questions, question_vectors, strict=True):
                    order = ranking((turn_vectors @ v).astype(np.float64))
                    ranks.append([c.turns[i].dia_id for i in order[:TOP_K]])
                    qs.append(q)
        r = recall(qs, ranks).any_evidence
        print(f"{name} int8: {len(qs)} questions, R@1 {r[1]:.3f} R@5 {r[5]:.3f} R@10 {r[10]:.3f}, "
              f"{n / secs:.0f} texts/s (1 lane)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
