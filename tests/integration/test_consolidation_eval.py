"""Consolidation on the labeled evaluation set, with the real int8 model (a few seconds)."""

import random

import pytest

from bench.consolidation_eval import EvalResult, candidates_of, evaluate, load_eval_set
from embedder.build import DEFAULT_OUT
from embedder.model import Embedder
from processors.consolidation import find_clusters, merge_cluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def result() -> tuple[EvalResult, list[list[int]]]:
    return evaluate()


def test_duplicate_pairs_are_found_with_precision_and_recall_above_target(
        result: tuple[EvalResult, list[list[int]]]) -> None:
    scores = result[0].scores
    # Targets 0.95 and 0.80, asserted with margin. Recall is that of restatements (the same
    # memory re-recorded with its key terms); measured: precision 0.978, recall 1.000.
    assert scores.precision >= 0.97
    assert scores.restated_recall >= 0.85
    # Paraphrases in other words included, recall is 0.733 with this embedding model (see
    # bench/data/README.md): a floor, so that a change that loses more of them shows.
    assert scores.recall >= 0.70


def test_the_clusters_do_not_depend_on_the_order_of_the_memories(
        result: tuple[EvalResult, list[list[int]]]) -> None:
    memories = load_eval_set()
    order = list(range(len(memories)))
    random.Random(5).shuffle(order)
    shuffled = [memories[i] for i in order]
    with Embedder.load(DEFAULT_OUT) as embedder:
        vectors = embedder.embed([memory.text for memory in shuffled])
    candidates = candidates_of(shuffled)
    clusters = find_clusters(candidates, vectors)

    def by_id(groups: list[list[int]], ids: list[str]) -> set[frozenset[str]]:
        return {frozenset(ids[i] for i in group) for group in groups}

    assert by_id(clusters, [m.memory_id for m in shuffled]) == by_id(
        result[1], [m.memory_id for m in memories])
    merged = {merge_cluster([candidates[i] for i in cluster], vectors[cluster]).record_id
              for cluster in clusters}
    assert len(merged) == len(clusters)
