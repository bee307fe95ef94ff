"""Embedder throughput and int8/fp32 parity.

    python -m bench.embedder_bench [--model NAME] [--seconds 12] [--sweep]

``run_embedder_bench`` embeds the same hand-written sentences with the int8 and the fp32 model
in alternating rounds (so that a busy machine slows both alike), in calls of ``batch_size``
texts (32, about what the stream pipeline hands over), and reports sentences/s and the mean
cosine between the two variants. ``--sweep`` adds the table behind docs/embedder.md: calls of
1/8/32/64 short (~12 words) and medium (~60 words) texts, for the Embedder (each text run on
its own, one text per core) and for plain padded batches (one onnxruntime run per call).
The model is built first if missing (a few seconds).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnxruntime as ort

from embedder.build import FP32_FILE, INT8_FILE, TOKENIZER_FILE
from embedder.build import main as build_main
from embedder.model import Embedder, Variant, default_threads
from embedder.models import DEFAULT_MODEL, MODELS, model_dir
from embedder.sentences import SENTENCES, medium_texts, short_texts

DEFAULT_MODEL_DIR = model_dir(DEFAULT_MODEL)

VARIANTS: tuple[Variant, ...] = ("int8", "fp32")


def _rate(fn: Callable[[Sequence[str]], object], batches: Sequence[Sequence[str]],
          seconds: float, whole_passes: bool = False) -> tuple[float, float]:
    """(texts/s, CPU ms per text) of fn over batches (cycled) for about `seconds`.

    With whole_passes, stops only at the end of a pass over all batches, so that every
    variant sees the same mix of texts. CPU time (all threads of this process) is less
    sensitive than wall time to other load on a shared machine.
    """
    done, i = 0, 0
    t0, c0 = time.perf_counter(), time.process_time()
    while True:
        batch = batches[i % len(batches)]
        fn(batch)
        done += len(batch)
        i += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds and (not whole_passes or i % len(batches) == 0):
            return done / elapsed, (time.process_time() - c0) * 1000 / done


def _batches(texts: Sequence[str], size: int) -> list[list[str]]:
    return [list(texts[i:i + size]) for i in range(0, len(texts), size)]


def run_embedder_bench(model_dir: Path = DEFAULT_MODEL_DIR, seconds: float = 12.0,
                       batch_size: int = 32, threads: int | None = None,
                       rounds: int = 3) -> dict[str, Any]:
    """Sentences/s of int8 and fp32 on the same sentences, and their mean cosine.

    `seconds` is the time spent embedding in all (both variants, all rounds), plus ~2 s of
    loading and the parity pass.
    """
    texts = list(SENTENCES)
    batches = _batches(texts, batch_size)
    models = {v: Embedder.load(model_dir, v, threads=threads) for v in VARIANTS}
    try:
        vectors = {v: m.embed(texts, role="passage") for v, m in models.items()}  # also warms up
        cos = np.sum(vectors["int8"] * vectors["fp32"], axis=1)
        rates: dict[str, list[float]] = {v: [] for v in VARIANTS}
        per_round = seconds / (rounds * len(VARIANTS))
        for _ in range(rounds):
            for v, m in models.items():
                rates[v].append(_rate(partial(m.embed, role="passage"), batches, per_round,
                                      whole_passes=True)[0])
    finally:
        for m in models.values():
            m.close()
    result: dict[str, Any] = {
        "model_id": {v: models[v].model_id for v in VARIANTS},
        "sentences": len(texts),
        "batch_size": batch_size,
        "threads": models["int8"].threads,
        "mean_cosine": float(cos.mean()),
        "min_cosine": float(cos.min()),
    }
    for v in VARIANTS:
        result[v] = {"sentences_per_s": statistics.median(rates[v]),
                     "rounds": [round(r, 1) for r in rates[v]]}
    result["speedup"] = result["int8"]["sentences_per_s"] / result["fp32"]["sentences_per_s"]
    return result


# --------------------------------------------------------------------------- sweep


class _PaddedBatchRunner:
    """One onnxruntime run per call over the padded batch (the alternative not taken)."""

    def __init__(self, model_dir: Path, variant: Variant, threads: int) -> None:
        from tokenizers import Tokenizer

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.log_severity_level = 3
        name = INT8_FILE if variant == "int8" else FP32_FILE
        self.session = ort.InferenceSession(str(model_dir / name), opts,
                                            providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_file(str(model_dir / TOKENIZER_FILE))
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        enc = self.tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        out = self.session.run(None, {"input_ids": ids, "attention_mask": mask,
                                      "token_type_ids": np.zeros_like(ids)})[0]
        return np.asarray(out, dtype=np.float32)


def run_sweep(model_dir: Path = DEFAULT_MODEL_DIR, seconds_per_cell: float = 1.0,
              batch_sizes: Sequence[int] = (1, 8, 32, 64), rounds: int = 2,
              threads: int | None = None) -> list[dict[str, Any]]:
    """Texts/s per (variant, mode, text length, call size); median over interleaved rounds."""
    lanes = default_threads() if threads is None else threads
    runners: dict[tuple[str, str], Callable[[Sequence[str]], object]] = {}
    closers: list[Embedder] = []
    for v in VARIANTS:
        e = Embedder.load(model_dir, v, threads=lanes)
        closers.append(e)
        runners[(v, "per-text")] = partial(e.embed, role="passage")
        runners[(v, "padded")] = _PaddedBatchRunner(model_dir, v, lanes).embed
    kinds = {"short": short_texts(64), "medium": medium_texts(64)}
    cells: dict[tuple[str, str, str, int], list[tuple[float, float]]] = {}
    try:
        for _ in range(rounds):
            for kind, texts in kinds.items():
                for bs in batch_sizes:
                    batches = _batches(texts, bs)
                    for (name, mode), fn in runners.items():
                        fn(batches[0])
                        cells.setdefault((name, mode, kind, bs), []).append(
                            _rate(fn, batches, seconds_per_cell))
    finally:
        for e in closers:
            e.close()
    return [{"variant": v, "mode": mode, "texts": kind, "batch": bs,
             "texts_per_s": statistics.median(x[0] for x in r),
             "cpu_ms_per_text": statistics.median(x[1] for x in r)}
            for (v, mode, kind, bs), r in cells.items()]


def run_batchmate_drift(model_dir: Path = DEFAULT_MODEL_DIR, batch_size: int = 32,
                        trials: int = 20, seed: int = 0) -> dict[str, dict[str, float]]:
    """Cosine between a text run alone and run inside a padded batch of random mates.

    This is the effect that made ``Embedder`` run every text on its own (where the cosine is
    exactly 1: the tests check bit-equality).
    """
    rng = np.random.default_rng(seed)
    pool = list(SENTENCES) + medium_texts(40)
    out: dict[str, dict[str, float]] = {}
    for v in VARIANTS:
        runner = _PaddedBatchRunner(model_dir, v, default_threads())
        alone = {t: runner.embed([t])[0] for t in pool}
        cos: list[float] = []
        for _ in range(trials):
            batch = [pool[i] for i in rng.choice(len(pool), size=batch_size, replace=False)]
            vecs = runner.embed(batch)
            cos += [float(vecs[j] @ alone[t]) for j, t in enumerate(batch)]
        c = np.array(cos)
        out[v] = {"mean": float(c.mean()), "p1": float(np.percentile(c, 1)),
                  "min": float(c.min()), "n": float(len(c))}
    return out


def _print_sweep(rows: list[dict[str, Any]]) -> None:
    sizes = sorted({r["batch"] for r in rows})
    print("texts/s (CPU ms per text), median of rounds")
    print(f"{'variant':7} {'mode':9} {'texts':7} " + " ".join(f"{'b' + str(b):>13}" for b in sizes))
    keys = sorted({(r["variant"], r["mode"], r["texts"]) for r in rows},
                  key=lambda k: (k[2], k[0], k[1]))
    for v, mode, kind in keys:
        cells = {r["batch"]: r for r in rows
                 if (r["variant"], r["mode"], r["texts"]) == (v, mode, kind)}
        print(f"{v:7} {mode:9} {kind:7} " + " ".join(
            f"{cells[b]['texts_per_s']:6.0f} ({cells[b]['cpu_ms_per_text']:4.1f})" for b in sizes))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.embedder_bench")
    parser.add_argument("--model", choices=sorted(MODELS), default=DEFAULT_MODEL)
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--sweep", action="store_true",
                        help="also the batch-size x text-length table (~1.5 min more)")
    args = parser.parse_args(argv)

    build_main(["--model", args.model])
    args.model_dir = model_dir(args.model)
    r = run_embedder_bench(args.model_dir, args.seconds, args.batch_size, args.threads)
    print(f"embedder bench: {r['sentences']} sentences, calls of {r['batch_size']}, "
          f"{r['threads']} threads")
    print(f"{'variant':8} {'sentences/s':>12}  rounds")
    for v in VARIANTS:
        print(f"{v:8} {r[v]['sentences_per_s']:12.1f}  {r[v]['rounds']}")
    print(f"int8 speedup x{r['speedup']:.2f}; int8 vs fp32 cosine mean {r['mean_cosine']:.4f}, "
          f"min {r['min_cosine']:.4f}")
    if args.sweep:
        print()
        _print_sweep(run_sweep(args.model_dir, threads=args.threads))
        print()
        print("padded batches of 32: cosine of a text to itself run alone")
        for name, d in run_batchmate_drift(args.model_dir).items():
            print(f"{name:7} mean {d['mean']:.6f}  p1 {d['p1']:.6f}  min {d['min']:.6f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
