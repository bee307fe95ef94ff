"""How hybrid search ranks: two ranked lists (dense: cosine; lexical: BM25), each's scores
scaled to [0, 1] over the list (min-max), combined as a weighted sum (a record missing from a
list gets 0 from it), then weighed by the recall profile (kinds, memory types, recency).

Min-max fusion keeps how far apart the candidates are, which rank fusion throws away; on the
development conversations it gave the best R@1. The dense list's weight is the embedding
model's (processors/text/calibration.py: 0.4 with MiniLM, the plain 1:1 with e5-small-v2;
docs/retrieval.md). 1.0 is a record first in both lists.

Profiles (seed 003) are named presets of what to recall and how to weigh it:

    default   every kind and type, no recency preference
    planning  decisions, commitments, patterns, lessons, preferences and the digests of runs:
              what was decided and how things are done here
    incident  fix patterns first, then run digests and lessons, recent ones preferred: what
              fixed this last time
    handoff   handoffs, commitments and decisions and the latest run digests, strongly
              preferring the recent: where things stand
    anchor    every kind and type, and what the best hits link to (wiki-links, related ids,
              shared entities), two hops out: a subject and its neighbourhood (seed 003)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from memstream_client.events import MemoryType, RecordKind
from processors.text.calibration import DEFAULT_CALIBRATION, Calibration


@dataclass(frozen=True)
class FusionWeights:
    dense: float
    lexical: float

    @classmethod
    def calibrated(cls, calibration: Calibration) -> FusionWeights:
        """The embedding model's weight of the dense list, the rest to the lexical one."""
        return cls(dense=calibration.dense_weight, lexical=1.0 - calibration.dense_weight)


class Fused(NamedTuple):
    """A record's place in both lists: its rank and score in each (None: not in it), what
    each scaled score adds to the fused one, and the fused score. A tuple: a search makes
    one for each of its ~150 candidates, and a frozen dataclass takes four times as long to
    make."""

    record_id: str
    score: float
    dense_rank: int | None
    lexical_rank: int | None
    dense_score: float | None = None
    lexical_score: float | None = None
    dense_scaled: float = 0.0
    lexical_scaled: float = 0.0


def scaled(scores: Sequence[tuple[str, float]]) -> dict[str, float]:
    """A list's scores scaled to [0, 1] over the list (all 1 when they are equal)."""
    if not scores:
        return {}
    low = min(score for _, score in scores)
    high = max(score for _, score in scores)
    span = high - low
    return {record_id: (score - low) / span if span > 0 else 1.0
            for record_id, score in scores}


def fuse(dense: Sequence[tuple[str, float]], lexical: Sequence[tuple[str, float]],
         weights: FusionWeights) -> list[Fused]:
    """The records of both ranked lists ((id, score), best first), by the weighted sum of
    their scaled scores, divided by the weights' sum so that 1.0 is the top."""
    dense_scaled, lexical_scaled = scaled(dense), scaled(lexical)
    dense_ranks = {record_id: rank for rank, (record_id, _) in enumerate(dense, 1)}
    lexical_ranks = {record_id: rank for rank, (record_id, _) in enumerate(lexical, 1)}
    dense_raw, lexical_raw = dict(dense), dict(lexical)
    total = weights.dense + weights.lexical
    fused = []
    for record_id in dict.fromkeys([*dense_ranks, *lexical_ranks]):
        from_dense = dense_scaled.get(record_id, 0.0)
        from_lexical = lexical_scaled.get(record_id, 0.0)
        fused.append(Fused(
            record_id, (weights.dense * from_dense + weights.lexical * from_lexical) / total,
            dense_ranks.get(record_id), lexical_ranks.get(record_id),
            dense_raw.get(record_id), lexical_raw.get(record_id), from_dense, from_lexical))
    # Ties: the dense rank decides, then the id, so every backend orders alike.
    fused.sort(key=lambda f: (-f.score, f.dense_rank or math.inf, f.record_id))
    return fused


def dense_support(cosine: float, calibration: Calibration = DEFAULT_CALIBRATION) -> float:
    """How far a record's embedding says it is about the query, in [0, 1]: nothing at or
    below the model's cosine of unrelated texts, fully at or above its cosine of one subject,
    linearly between (processors/text/calibration.py, docs/retrieval.md#relevance)."""
    span = calibration.dense_same_subject - calibration.dense_unrelated
    return min(1.0, max(0.0, (cosine - calibration.dense_unrelated) / span))


def support(dense: float, lexical: float) -> float:
    """A record's own support for the query, in [0, 1], from both signals (`dense_support`;
    `processors.text.lexical.coverage`): either suffices, both together count more than either
    (1 - (1 - dense)(1 - lexical)). A record that holds the query's words is supported however
    far its embedding is; one that says the same in other words, however few words it
    shares."""
    return 1.0 - (1.0 - dense) * (1.0 - lexical)


def query_support(cosine: float, lexical: float, query_terms: int,
                  calibration: Calibration = DEFAULT_CALIBRATION) -> float:
    """A record's own support for a query of `query_terms` content terms, from its cosine to
    the query and its `coverage` of the query's words. A query of one content term is a
    keyword lookup, and its words alone decide: a lone word's embedding says nothing of a
    text (e5-small-v2 puts "instead" at 0.78-0.82 from every sentence of a namespace, above
    its cosine of unrelated sentences, so every dense candidate would be shown)."""
    dense = 0.0 if query_terms == 1 else dense_support(cosine, calibration)
    return support(dense, lexical)


def relevance(own: float, best: float) -> float:
    """A hit's relevance, what `min_score` is a floor on: the geometric mean of its own
    support and the best support among the query's candidates. The best says whether the
    namespace knows the query's subject at all (a question about something it never held
    finds nothing well supported, so every hit falls under 0.5: "nothing here"); its own
    cuts hits that the best one does not carry. Ranking is the fused score's; relevance only
    decides what is shown."""
    return math.sqrt(own * best)


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    # What it recalls: these kinds and memory types (empty: all).
    record_kinds: tuple[RecordKind, ...] = ()
    memory_types: tuple[MemoryType, ...] = ()
    # Multipliers of the fused score by record kind and by memory type (1 when absent).
    kind_weights: Mapping[str, float] = field(default_factory=dict)
    type_weights: Mapping[str, float] = field(default_factory=dict)
    # With a half-life, a record's score is multiplied by 0.5 + 0.5 * 2^(-age / half-life):
    # older records weigh down to half, never to nothing.
    recency_half_life_days: float | None = None
    # Hops a recall follows from its best hits along links and shared entities (0: none;
    # processors/knowledge/graph.py).
    expand_hops: int = 0

    @property
    def max_weight(self) -> float:
        """No record is weighed more than this."""
        return max([1.0, *self.kind_weights.values()]) * max([1.0, *self.type_weights.values()])

    def weight(self, record_kind: str, memory_type: str | None, age_days: float) -> float:
        weight = self.kind_weights.get(record_kind, 1.0)
        if memory_type is not None:
            weight *= self.type_weights.get(memory_type, 1.0)
        if self.recency_half_life_days is not None:
            weight *= 0.5 + 0.5 * 2 ** (-max(0.0, age_days) / self.recency_half_life_days)
        return weight


# What a search recalls unless it names kinds: agents' memory and the runs' history. Chunks
# of documents are an index of external text, searched when asked for (kind=doc_chunk) and
# by the context pack's documents section.
RECALLED_KINDS: tuple[RecordKind, ...] = ("memory", "run_digest", "fix_pattern")

PROFILES: dict[str, Profile] = {
    profile.name: profile for profile in (
        Profile("default", "memories and history of every type, no recency preference",
                record_kinds=RECALLED_KINDS),
        Profile(
            "planning", "what was decided and how things are done here",
            record_kinds=("memory", "run_digest"),
            memory_types=("decision", "commitment", "pattern", "lesson", "preference",
                          "fact"),
            type_weights={"decision": 1.3, "commitment": 1.2, "pattern": 1.2, "lesson": 1.1},
            recency_half_life_days=90.0,
        ),
        Profile(
            "incident", "what fixed this last time",
            record_kinds=("fix_pattern", "run_digest", "memory"),
            memory_types=("lesson", "pattern", "fact", "decision"),
            kind_weights={"fix_pattern": 1.5, "run_digest": 1.2},
            type_weights={"lesson": 1.2},
            recency_half_life_days=30.0,
        ),
        Profile(
            "handoff", "where things stand",
            record_kinds=("memory", "run_digest"),
            memory_types=("handoff", "commitment", "decision", "fact"),
            kind_weights={"run_digest": 1.2},
            type_weights={"handoff": 1.5, "commitment": 1.3},
            recency_half_life_days=7.0,
        ),
        Profile(
            "anchor", "a subject and what it links to: the best hits, then the memories "
            "their links and shared entities reach, two hops out",
            record_kinds=RECALLED_KINDS, expand_hops=2,
        ),
    )
}


def age_in_days(created_at: datetime, now: datetime) -> float:
    return max(0.0, (now - created_at).total_seconds() / 86400)
