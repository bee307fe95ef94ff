"""Duplicate-pair precision and recall of consolidation on a labeled set of real sentences.

    python -m bench.consolidation_eval [--show]

bench/data/consolidation_eval.jsonl holds memories from real prose (the seed documents,
memstream's own docs, package READMEs), planted paraphrases of some of them (a `group` each)
and distinct memories on the same topics (`group` null). Every memory is embedded with the
real int8 model, `find_clusters` groups them, and each pair of memories put in one cluster
is scored against the pairs that share a group:

- precision: the share of clustered pairs that are true duplicates;
- recall: the share of true pairs clustered;
- recall of restatements: the same, over the pairs with no `reworded` paraphrase in them
  (a `restated` paraphrase re-records a memory keeping its key terms; a `reworded` one says
  it in other words, which this embedding model often scores below same-topic distinct
  facts; see bench/data/README.md).
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from embedder.build import DEFAULT_OUT
from embedder.model import Embedder
from processors.consolidation import (
    ConsolidationCandidate,
    ConsolidationSettings,
    find_clusters,
    merge_cluster,
)
from schemas.events import MemoryType

EVAL_SET = Path(__file__).parent / "data" / "consolidation_eval.jsonl"
NAMESPACE = "eval"
T0 = datetime(2026, 11, 1, tzinfo=UTC)

Paraphrase = Literal["restated", "reworded"]


@dataclass(frozen=True)
class EvalMemory:
    memory_id: str
    text: str
    memory_type: MemoryType
    group: str | None
    paraphrase: Paraphrase | None


@dataclass(frozen=True)
class PairScores:
    true_pairs: int
    clustered_pairs: int
    precision: float
    recall: float
    restated_recall: float


@dataclass(frozen=True)
class EvalResult:
    memories: int
    groups: int
    clusters: int
    scores: PairScores
    embed_seconds: float
    cluster_seconds: float
    merge_seconds: float


def load_eval_set(path: Path = EVAL_SET) -> list[EvalMemory]:
    memories = []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        memories.append(EvalMemory(row["id"], row["text"], row["memory_type"], row["group"],
                                   row["paraphrase"]))
    return memories


def candidates_of(memories: Sequence[EvalMemory]) -> list[ConsolidationCandidate]:
    """The set as live memories of one namespace: only the memory type partitions it."""
    return [
        ConsolidationCandidate(
            record_id=memory.memory_id, namespace=NAMESPACE, scope="shared", agent_id=None,
            record_kind="memory", memory_type=memory.memory_type, text=memory.text, title=None,
            tags=(), related_ids=(), review_state="approved",
            source_event_ids=(f"event-{memory.memory_id}",),
            created_at=T0 + timedelta(minutes=index))
        for index, memory in enumerate(memories)
    ]


def pair_scores(memories: Sequence[EvalMemory], clusters: Iterable[Sequence[int]]) -> PairScores:
    """Pairs of memories clustered together, scored against the pairs sharing a group."""
    def pairs(groups: Iterable[Sequence[int]]) -> set[tuple[int, int]]:
        return {pair for group in groups for pair in itertools.combinations(sorted(group), 2)}

    by_group: dict[str, list[int]] = {}
    for index, memory in enumerate(memories):
        if memory.group is not None:
            by_group.setdefault(memory.group, []).append(index)
    truth = pairs(by_group.values())
    restated = {(a, b) for a, b in truth
                if "reworded" not in (memories[a].paraphrase, memories[b].paraphrase)}
    clustered = pairs(clusters)
    hits = clustered & truth
    return PairScores(
        true_pairs=len(truth),
        clustered_pairs=len(clustered),
        precision=len(hits) / len(clustered) if clustered else 1.0,
        recall=len(hits) / len(truth) if truth else 1.0,
        restated_recall=len(hits & restated) / len(restated) if restated else 1.0,
    )


def evaluate(settings: ConsolidationSettings | None = None, model_dir: Path = DEFAULT_OUT,
             path: Path = EVAL_SET) -> tuple[EvalResult, list[list[int]]]:
    """Embed the set, cluster it, merge every cluster; the figures and the clusters."""
    memories = load_eval_set(path)
    candidates = candidates_of(memories)
    started = time.perf_counter()
    with Embedder.load(model_dir) as embedder:
        vectors = embedder.embed([memory.text for memory in memories])
    embedded = time.perf_counter()
    clusters = find_clusters(candidates, vectors, settings)
    clustered = time.perf_counter()
    for cluster in clusters:
        merge_cluster([candidates[i] for i in cluster], vectors[cluster], settings)
    merged = time.perf_counter()
    result = EvalResult(
        memories=len(memories),
        groups=len({memory.group for memory in memories if memory.group is not None}),
        clusters=len(clusters),
        scores=pair_scores(memories, clusters),
        embed_seconds=embedded - started,
        cluster_seconds=clustered - embedded,
        merge_seconds=merged - clustered,
    )
    return result, clusters


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.consolidation_eval",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--show", action="store_true",
                        help="print every cluster, marking the members of another group")
    args = parser.parse_args(argv)

    result, clusters = evaluate()
    scores = result.scores
    print(f"memories {result.memories}, duplicate groups {result.groups}, "
          f"true pairs {scores.true_pairs}")
    print(f"clusters {result.clusters}, clustered pairs {scores.clustered_pairs}")
    print(f"precision                 {scores.precision:.3f}   (target >= 0.95)")
    print(f"recall                    {scores.recall:.3f}   (target >= 0.80)")
    print(f"recall of restatements    {scores.restated_recall:.3f}")
    print(f"time: embed {result.embed_seconds:.2f} s, find_clusters "
          f"{result.cluster_seconds:.2f} s, merge {result.merge_seconds:.3f} s")
    if args.show:
        memories = load_eval_set()
        for cluster in clusters:
            groups = [memories[i].group or "" for i in cluster]
            majority = max(sorted(set(groups)), key=groups.count)
            print()
            for i in cluster:
                right = memories[i].group is not None and memories[i].group == majority
                print(f" {' ' if right else '!'} {memories[i].group or '-':>5} "
                      f"{memories[i].text}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
