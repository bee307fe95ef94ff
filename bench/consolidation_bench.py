"""Consolidation time for 10,000 memories: find_clusters (PCA, HDBSCAN, the backgrounds of
local scaling, guard), then a merge per cluster, as one consolidation run does them. Embedding
is not part of it.

    python -m bench.consolidation_bench

The memories are synthetic but lie where real ones do: ~1,200 real sentences (the consolidation
evaluation set, and bench/data/prose_sentences.txt) are embedded once with the real model; 7,000
distinct memories are those sentences and blends of two of them (text: both sentences; vector:
the normalised sum of theirs, as mean pooling would give), and 3,000 more are near-duplicates of
distinct ones (a word dropped from the text; the vector turned by a random direction to a cosine
of 0.85-0.97 to its source). Measured twice: all in one partition (the worst case: one
namespace, one memory type) and spread over five memory types.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import numpy.typing as npt

from bench.consolidation_eval import EVAL_SET, SETTINGS, SIMILARITY_DIR
from embedder.model import Embedder
from memstream_client.events import MemoryType
from processors.consolidation.candidates import ConsolidationCandidate
from processors.consolidation.clusters import find_clusters, merge_cluster

# Frozen, so that rewriting the docs does not change the benchmark's input.
PROSE_SENTENCES = Path(__file__).resolve().parent / "data" / "prose_sentences.txt"
MEMORIES = 10_000
DUPLICATES = 3_000
TARGET = "<= 20 s"
T0 = datetime(2026, 11, 1, tzinfo=UTC)
TYPE_SHARES: dict[MemoryType, float] = {
    "fact": 0.5, "decision": 0.15, "lesson": 0.15, "pattern": 0.12, "preference": 0.08}


def real_sentences() -> list[str]:
    """The evaluation set's memories and the prose sentences of memstream's own notes."""
    texts = [json.loads(line)["text"] for line in EVAL_SET.read_text().splitlines()]
    texts += PROSE_SENTENCES.read_text().splitlines()
    return list(dict.fromkeys(texts))


def synthetic_memories(texts: Sequence[str], vectors: npt.NDArray[np.float32],
                       types: Sequence[MemoryType], seed: int = 7,
                       ) -> tuple[list[ConsolidationCandidate], npt.NDArray[np.float64]]:
    """MEMORIES candidates and their vectors, built from embedded real sentences."""
    rng = np.random.default_rng(seed)
    distinct = MEMORIES - DUPLICATES
    base = vectors.astype(np.float64)
    first = rng.integers(0, len(texts), distinct)
    second = rng.integers(0, len(texts), distinct)
    first[:len(texts)] = second[:len(texts)] = np.arange(len(texts))
    matrix = base[first] + base[second]
    bodies = [texts[a] if a == b else f"{texts[a]} {texts[b]}"
              for a, b in zip(first.tolist(), second.tolist(), strict=True)]

    sources = rng.integers(0, distinct, DUPLICATES)
    direction = rng.normal(size=(DUPLICATES, base.shape[1]))
    direction -= (direction * _unit(matrix[sources])).sum(axis=1)[:, None] * _unit(
        matrix[sources])
    cosine = rng.uniform(0.85, 0.97, DUPLICATES)
    duplicates = (_unit(matrix[sources]) * cosine[:, None]
                  + _unit(direction) * np.sqrt(1 - cosine**2)[:, None])
    for source in sources.tolist():
        words = bodies[source].split()
        del words[int(rng.integers(0, len(words)))]
        bodies.append(" ".join(words))

    # A duplicate has its source's type: memories of two types are never merged.
    memory_types = rng.choice(len(types), distinct, p=_shares(types))
    memory_types = np.concatenate([memory_types, memory_types[sources]])
    candidates = [
        ConsolidationCandidate(
            record_id=f"mem_bench{index:05d}", namespace="bench", scope="shared",
            agent_id=None, record_kind="memory", memory_type=types[memory_types[index]],
            text=body, title=None, tags=(), related_ids=(), review_state="approved",
            source_event_ids=(f"event-{index}",), created_at=T0 + timedelta(seconds=index))
        for index, body in enumerate(bodies)
    ]
    return candidates, _unit(np.vstack([matrix, duplicates]))


@dataclass(frozen=True)
class RunTimes:
    """Seconds spent by one consolidation run, per step."""

    reduce: float
    hdbscan: float
    neighbours: float
    guard: float
    merge: float
    total: float
    clusters: int


def consolidate(candidates: Sequence[ConsolidationCandidate],
                vectors: npt.NDArray[np.float64]) -> RunTimes:
    """One consolidation run's compute: find the clusters, merge each."""
    timings: dict[str, float] = {}
    started = time.perf_counter()
    clusters = find_clusters(candidates, vectors, SETTINGS, timings=timings)
    clustered = time.perf_counter()
    for cluster in clusters:
        merge_cluster([candidates[i] for i in cluster], vectors[cluster], SETTINGS)
    finished = time.perf_counter()
    return RunTimes(reduce=timings["reduce"], hdbscan=timings["hdbscan"],
                    neighbours=timings["neighbours"], guard=timings["guard"],
                    merge=finished - clustered, total=finished - started,
                    clusters=len(clusters))


def run_consolidation_bench(model_dir: Path = SIMILARITY_DIR) -> list[tuple[str, str, str]]:
    texts = real_sentences()
    with Embedder.load(model_dir) as embedder:
        vectors = embedder.embed(texts, role="passage")
    rows: list[tuple[str, str, str]] = []
    for label, types in (("one partition", ("fact",)),
                         ("5 memory types", tuple(TYPE_SHARES))):
        candidates, matrix = synthetic_memories(texts, vectors, types)
        spent = consolidate(candidates, matrix)
        rows += [
            (f"consolidation, {MEMORIES:,} memories in {label}", f"{spent.total:.2f} s",
             TARGET),
            ("  PCA to 64 dimensions", f"{spent.reduce:.2f} s", ""),
            ("  HDBSCAN", f"{spent.hdbscan:.2f} s", ""),
            ("  backgrounds (k-th nearest neighbour)", f"{spent.neighbours:.2f} s", ""),
            ("  guard (original space)", f"{spent.guard:.2f} s", ""),
            (f"  merge of {spent.clusters} clusters", f"{spent.merge:.2f} s", ""),
        ]
    return rows


def _unit(matrix: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    unit: npt.NDArray[np.float64] = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    return unit


def _shares(types: Sequence[MemoryType]) -> list[float]:
    weights = [TYPE_SHARES[memory_type] for memory_type in types]
    return [weight / sum(weights) for weight in weights]


if __name__ == "__main__":
    for name, value, target in run_consolidation_bench():
        print(f"{name:<62}  {value:>16}  {target}")
