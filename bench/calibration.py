"""The thresholds of processors/text/calibration.py that no labelled sweep picks, measured
for every model on text that is not the retrieval benchmark's.

    python -m bench.calibration

- Relevance's anchors: every pair of the 485 prose sentences of
  bench/data/prose_sentences.txt (bench/data/README.md), one as a query and the other as a
  stored text, are unrelated. e5-small-v2's "nothing in common" is their median cosine and
  its "same subject" their 99th percentile (a cosine above what 99 of 100 unrelated pairs
  reach); the paraphrase pairs of embedder/sentences.py show where rewordings start.
  all-MiniLM-L6-v2's anchors (0.2 and 0.6) were set before this rule, from the same
  sentences; both are printed beside what each model uses.
- The context pack's near-duplicate bar: the distinct pairs of
  bench/data/consolidation_eval.jsonl (memories of no shared group) that a bar drops as
  duplicates. MiniLM's 0.92 drops a handful; another model's bar is the lowest that drops no
  more of them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt

from bench.consolidation_eval import _true_pairs, load_eval_set
from embedder.model import Embedder
from embedder.models import MODELS, model_dir
from embedder.sentences import PARAPHRASES
from processors.text.calibration import MINILM, calibration_of

PROSE = Path(__file__).resolve().parent / "data" / "prose_sentences.txt"
PACK_BARS = tuple(round(0.90 + 0.01 * step, 2) for step in range(10))


def unrelated_cosines(embedder: Embedder, sentences: list[str]) -> npt.NDArray[np.float32]:
    """Each sentence as a query against every other as a stored text."""
    queries = embedder.embed(sentences, role="query")
    stored = embedder.embed(sentences, role="passage")
    cosines = queries @ stored.T
    off_diagonal: npt.NDArray[np.float32] = cosines[~np.eye(len(sentences), dtype=bool)]
    return off_diagonal


def distinct_pair_cosines(embedder: Embedder) -> npt.NDArray[np.float32]:
    """The cosines of the consolidation set's pairs that are not duplicates."""
    memories = load_eval_set()
    truth, _ = _true_pairs(memories)
    vectors = embedder.embed([memory.text for memory in memories], role="passage")
    rows, columns = np.triu_indices(len(memories), 1)
    distinct = np.array([(int(a), int(b)) not in truth
                         for a, b in zip(rows, columns, strict=True)])
    cosines: npt.NDArray[np.float32] = np.sum(vectors[rows] * vectors[columns], axis=1)
    kept: npt.NDArray[np.float32] = cosines[distinct]
    return kept


def main() -> int:
    sentences = [line.strip() for line in PROSE.read_text().splitlines() if line.strip()]
    dropped: dict[str, dict[float, int]] = {}
    for name in MODELS:
        calibration = calibration_of(name)
        with Embedder.load(model_dir(name)) as embedder:
            unrelated = unrelated_cosines(embedder, sentences)
            paraphrases = np.sum(
                embedder.embed([a for a, _ in PARAPHRASES], role="query")
                * embedder.embed([b for _, b in PARAPHRASES], role="passage"), axis=1)
            distinct = distinct_pair_cosines(embedder)
        p50, p90, p99 = np.percentile(unrelated, [50, 90, 99])
        dropped[name] = {bar: int((distinct >= bar).sum()) for bar in PACK_BARS}
        print(f"{name}: {len(unrelated)} unrelated query/stored pairs, cosine median {p50:.3f}, "
              f"90th percentile {p90:.3f}, 99th {p99:.3f}; {len(paraphrases)} paraphrases "
              f"from {paraphrases.min():.3f} (median {np.median(paraphrases):.3f})")
        print(f"  relevance anchors by the rule {p50:.3f} / {p99:.3f}; in use "
              f"{calibration.dense_unrelated} / {calibration.dense_same_subject}")
    print(f"\ndistinct pairs of the consolidation set dropped as near-duplicates by a bar "
          f"(MiniLM's {MINILM.pack_duplicate} is the reference)")
    print("bar    " + "  ".join(f"{name:>18}" for name in MODELS))
    for bar in PACK_BARS:
        print(f"{bar:.2f}   " + "  ".join(f"{dropped[name][bar]:>18}" for name in MODELS))
    allowed = dropped[MINILM.model][MINILM.pack_duplicate]
    for name in MODELS:
        picked = min((bar for bar in PACK_BARS if dropped[name][bar] <= allowed), default=None)
        print(f"{name}: lowest bar dropping at most {allowed}: {picked}; in use "
              f"{calibration_of(name).pack_duplicate}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
