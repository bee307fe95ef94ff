"""Dense-only retrieval on the development split, one model against another (issue 39).

    python -m bench.model_compare [DATA]

MiniLM int8 (.cache/model) and e5-small-v2 int8 (.cache/models/e5-small-v2, built by
``python -m embedder.build_packaged``), e5 with its prefixes and without; R@k as in
bench.retrieval_eval, and texts/s on one lane.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from bench.retrieval_eval import DATA_FILE, TOP_K, Question, load_conversations, ranking, recall
from embedder.model import Embedder
from embedder.models import E5_SMALL_V2, MINILM, PROJECT_ROOT, ModelSpec

RUNS: tuple[tuple[str, Path, ModelSpec, bool], ...] = (
    ("MiniLM int8", PROJECT_ROOT / ".cache" / "model", MINILM, True),
    ("e5-small-v2 int8, prefixes", PROJECT_ROOT / ".cache/models/e5-small-v2", E5_SMALL_V2, True),
    ("e5-small-v2 int8, no prefixes", PROJECT_ROOT / ".cache/models/e5-small-v2", E5_SMALL_V2,
     False),
)


def main(argv: list[str]) -> int:
    convs = load_conversations(Path(argv[0]) if argv else DATA_FILE)
    for label, model_dir, spec, use_prefixes in RUNS:
        qs: list[Question] = []
        ranks: list[list[str]] = []
        n, secs = 0, 0.0
        with Embedder.load(model_dir, "int8", threads=1) as embedder:
            for c in convs:
                questions = [q for q in c.questions if q.evidence]
                if not questions:
                    continue
                turns = [t.text for t in c.turns]
                asked = [q.text for q in questions]
                if use_prefixes:
                    turns, asked = spec.prefixed(turns, "passage"), spec.prefixed(asked, "query")
                t0 = time.perf_counter()
                turn_vectors = embedder.embed(turns)
                question_vectors = embedder.embed(asked)
                secs += time.perf_counter() - t0
                n += len(turns) + len(asked)
                for q, v in zip(questions, question_vectors, strict=True):
                    order = ranking((turn_vectors @ v).astype(np.float64))
                    ranks.append([c.turns[i].dia_id for i in order[:TOP_K]])
                    qs.append(q)
        r = recall(qs, ranks).any_evidence
        print(f"{label}: {len(qs)} questions, R@1 {r[1]:.3f} R@5 {r[5]:.3f} R@10 {r[10]:.3f}, "
              f"{n / secs:.0f} texts/s (1 lane)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
