"""Precision and recall of stale-fact invalidation (processors/knowledge/stale_facts.py) on a
labelled set of pairs of memories.

    python -m bench.invalidation_eval [--sweep] [--json PATH]

bench/data/invalidation_eval.jsonl (bench/data/README.md) holds pairs of an older and a newer
memory, labelled true when the newer makes the older stale (a value changed, an opposite, a
denial, a change said so) and false for the hard negatives (another subject, a list that
grew, two facts both true, a paraphrase with the same value, a question, a conversation turn,
a time relative to the writing). Each pair is embedded with the real int8 model and written
as two live memories of one namespace, scope and owner, the older one day before the newer;
`invalidation_of` judges them at the cosine of their vectors. "Invalidated" is the positive
class: precision is the share of invalidations that were meant (a false one hides a true
fact), recall the share of meant ones made.

Each pair lies in the `dev` or the `test` half (by a hash of its id). IN_USE and the
rule were tuned on dev alone; `--sweep` prints dev's figures for each threshold, and the one
picked is the highest with the best dev recall at precision >= TARGET_PRECISION.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import numpy as np

from embedder.model import Embedder
from harness.stack import MODEL, MODEL_DIR
from processors.consolidation.candidates import ConsolidationCandidate
from processors.knowledge.stale_facts import Invalidation, invalidation_of
from processors.text.calibration import calibration_of

# The threshold in use for the model measured (harness.stack.MODEL, MEMSTREAM_MODEL).
IN_USE = calibration_of(MODEL.name).stale

DATA = Path(__file__).resolve().parent / "data" / "invalidation_eval.jsonl"
NAMESPACE = "eval"
OLDER_AT = datetime(2026, 11, 1, 9, tzinfo=UTC)
NEWER_AT = OLDER_AT + timedelta(days=1)
# On dev, IN_USE is the highest cosine with the best recall at this precision (`--sweep`).
TARGET_PRECISION = 0.95
THRESHOLDS = tuple(round(0.50 + 0.01 * step, 2) for step in range(46))

Split = Literal["dev", "test"]
SPLITS: tuple[Split, ...] = ("dev", "test")


@dataclass(frozen=True)
class LabelledPair:
    pair_id: str
    older: str
    newer: str
    # True: the newer memory makes the older one stale.
    stale: bool
    kind: str
    split: Split


@dataclass(frozen=True)
class Judged:
    pair: LabelledPair
    cosine: float
    found: Invalidation | None


@dataclass(frozen=True)
class Score:
    true_positives: int
    invalidated: int
    meant: int
    pairs: int

    @property
    def precision(self) -> float:
        return self.true_positives / self.invalidated if self.invalidated else 1.0

    @property
    def recall(self) -> float:
        return self.true_positives / self.meant if self.meant else 1.0


def load(path: Path = DATA) -> list[LabelledPair]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return [LabelledPair(row["id"], row["older"], row["newer"], row["label"], row["class"],
                         row["split"]) for row in rows]


def candidate(record_id: str, text: str, occurred_at: datetime) -> ConsolidationCandidate:
    """A live memory of the evaluation's namespace, shared scope, no owner."""
    return ConsolidationCandidate(
        record_id=record_id, namespace=NAMESPACE, scope="shared", agent_id=None,
        record_kind="memory", memory_type="fact", text=text, title=None, tags=(),
        related_ids=(), review_state="approved", source_event_ids=(f"event-{record_id}",),
        created_at=occurred_at)


def cosines(pairs: Sequence[LabelledPair], model_dir: Path = MODEL_DIR) -> list[float]:
    """Each pair's cosine, every text embedded once with the int8 model."""
    texts = list(dict.fromkeys(text for pair in pairs for text in (pair.older, pair.newer)))
    with Embedder.load(model_dir) as embedder:
        vectors = embedder.embed(texts, role="passage")
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    row = {text: index for index, text in enumerate(texts)}
    return [float(unit[row[pair.older]] @ unit[row[pair.newer]]) for pair in pairs]


def judge(pairs: Sequence[LabelledPair], measured: Sequence[float],
          threshold: float = IN_USE) -> list[Judged]:
    return [Judged(pair, cosine, invalidation_of(
                candidate(f"{pair.pair_id}-newer", pair.newer, NEWER_AT),
                candidate(f"{pair.pair_id}-older", pair.older, OLDER_AT), cosine, threshold))
            for pair, cosine in zip(pairs, measured, strict=True)]


def score(judged: Sequence[Judged]) -> Score:
    return Score(sum(item.pair.stale and item.found is not None for item in judged),
                 sum(item.found is not None for item in judged),
                 sum(item.pair.stale for item in judged), len(judged))


def in_split(judged: Sequence[Judged], split: Split) -> list[Judged]:
    return [item for item in judged if item.pair.split == split]


def sweep(pairs: Sequence[LabelledPair], measured: Sequence[float],
          split: Split = "dev") -> list[tuple[float, Score]]:
    return [(threshold, score(in_split(judge(pairs, measured, threshold), split)))
            for threshold in THRESHOLDS]


def picked(scores: Sequence[tuple[float, Score]]) -> float | None:
    """The highest threshold with the best recall among those whose precision reaches
    TARGET_PRECISION: the rule's lexical demands keep the hard negatives out, and a higher
    cosine is a margin against what they miss. None if no threshold reaches it."""
    reaching = [(result.recall, threshold) for threshold, result in scores
                if result.precision >= TARGET_PRECISION]
    return max(reaching)[1] if reaching else None


def report(judged: Sequence[Judged]) -> str:
    lines = [f"pairs {len(judged)}, threshold {IN_USE:.2f}", "",
             f"{'split':<6} {'pairs':>5} {'stale':>5} {'invalidated':>11} {'right':>5} "
             f"{'precision':>9} {'recall':>6}"]
    for split in SPLITS:
        result = score(in_split(judged, split))
        lines.append(f"{split:<6} {result.pairs:>5} {result.meant:>5} {result.invalidated:>11} "
                     f"{result.true_positives:>5} {result.precision:>9.3f} {result.recall:>6.3f}")
    lines += ["", f"{'class':<26} {'label':>5}  {'dev':>7}  {'test':>7}   (invalidated / pairs)"]
    kinds = list(dict.fromkeys(item.pair.kind for item in judged))
    for kind in kinds:
        of_kind = [item for item in judged if item.pair.kind == kind]
        cells = []
        for split in SPLITS:
            here = in_split(of_kind, split)
            cells.append(f"{sum(item.found is not None for item in here)}/{len(here)}")
        label = "stale" if of_kind[0].pair.stale else "kept"
        lines.append(f"{kind:<26} {label:>5}  {cells[0]:>7}  {cells[1]:>7}")
    for title, wrong in (
            ("false positives", [item for item in judged
                                 if item.found is not None and not item.pair.stale]),
            ("false negatives", [item for item in judged
                                 if item.found is None and item.pair.stale])):
        lines += ["", f"{title} {len(wrong)}:"]
        lines += [f"  {item.pair.split:<4} {item.pair.pair_id} {item.pair.kind:<24} "
                  f"cos {item.cosine:.3f}  {item.pair.older!r} -> {item.pair.newer!r}"
                  + (f"  [{item.found.because}: {item.found.detail}]" if item.found else "")
                  for item in wrong]
    return "\n".join(lines)


def as_json(judged: Sequence[Judged]) -> dict[str, Any]:
    def figures(result: Score) -> dict[str, Any]:
        return {"pairs": result.pairs, "stale": result.meant, "invalidated": result.invalidated,
                "true_positives": result.true_positives, "precision": result.precision,
                "recall": result.recall}

    return {
        "threshold": IN_USE,
        "splits": {split: figures(score(in_split(judged, split))) for split in SPLITS},
        "classes": {kind: {split: figures(score(in_split(
            [item for item in judged if item.pair.kind == kind], split))) for split in SPLITS}
            for kind in dict.fromkeys(item.pair.kind for item in judged)},
        "pairs": [{"id": item.pair.pair_id, "cosine": round(item.cosine, 4),
                   "label": item.pair.stale, "invalidated": item.found is not None,
                   "because": item.found.because if item.found else None,
                   "detail": item.found.detail if item.found else None} for item in judged],
    }


def invalidation_rows() -> list[tuple[str, str, str]]:
    """`make bench`'s rows: precision and recall on the test half."""
    pairs = load()
    result = score(in_split(judge(pairs, cosines(pairs)), "test"))
    return [
        (f"stale-fact invalidation precision ({result.pairs} test pairs)",
         f"{result.precision:.3f}", ">= 0.95"),
        ("stale-fact invalidation recall (same pairs)", f"{result.recall:.3f}", ""),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.invalidation_eval",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--sweep", action="store_true",
                        help="print dev's precision and recall for each threshold")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write every figure here")
    args = parser.parse_args(argv)

    pairs = load(args.data)
    measured = cosines(pairs)
    if args.sweep:
        scores = sweep(pairs, measured)
        print(f"{'cosine':>6}  {'invalidated':>11}  {'precision':>9}  {'recall':>6}   (dev)")
        for threshold, result in scores:
            print(f"{threshold:>6.2f}  {result.invalidated:>11}  {result.precision:>9.3f}  "
                  f"{result.recall:>6.3f}")
        best = picked(scores)
        print(f"highest cosine with the best dev recall at precision >= {TARGET_PRECISION}: "
              f"{'none' if best is None else f'{best:.2f}'}; in use: {IN_USE:.2f}")
        return 0
    judged = judge(pairs, measured)
    print(report(judged))
    if args.json is not None:
        args.json.write_text(json.dumps(as_json(judged), indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
