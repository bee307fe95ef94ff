"""How hybrid search ranks: two ranked lists (dense: cosine; lexical: BM25) fused by weighted
reciprocal rank, then weighed by the recall profile (kinds, memory types, recency).

Reciprocal rank fusion uses ranks, not scores, so the two signals need no common scale:
a record's fused score is the sum over the lists it appears in of weight / (k + rank). It is
reported divided by its best possible value (rank 1 in both lists), so 1.0 is the top.

Profiles (seed 003) are named presets of what to recall and how to weigh it:

    default   every kind and type, no recency preference
    planning  decisions, commitments, patterns, lessons, preferences and the digests of runs:
              what was decided and how things are done here
    incident  fix patterns first, then run digests and lessons, recent ones preferred: what
              fixed this last time
    handoff   handoffs, commitments and decisions and the latest run digests, strongly
              preferring the recent: where things stand
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from schemas.events import MemoryType, RecordKind

# Reciprocal rank fusion's constant: how much rank 1 outweighs rank 10.
RRF_K = 60


@dataclass(frozen=True)
class FusionWeights:
    dense: float = 1.0
    lexical: float = 1.0


@dataclass(frozen=True)
class Fused:
    record_id: str
    score: float
    dense_rank: int | None
    lexical_rank: int | None


def fuse(dense: Sequence[str], lexical: Sequence[str], weights: FusionWeights,
         k: int = RRF_K) -> list[Fused]:
    """The records of both ranked lists (best first), by weighted reciprocal rank."""
    dense_ranks = {record_id: rank for rank, record_id in enumerate(dense, 1)}
    lexical_ranks = {record_id: rank for rank, record_id in enumerate(lexical, 1)}
    best = (weights.dense + weights.lexical) / (k + 1)
    fused = []
    for record_id in dict.fromkeys([*dense, *lexical]):
        d, w = dense_ranks.get(record_id), lexical_ranks.get(record_id)
        score = (weights.dense / (k + d) if d else 0.0) + (
            weights.lexical / (k + w) if w else 0.0)
        fused.append(Fused(record_id, score / best, d, w))
    # Ties: the dense rank decides, then the id, so every backend orders alike.
    fused.sort(key=lambda f: (-f.score, f.dense_rank or math.inf, f.record_id))
    return fused


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    # What it recalls: these kinds and memory types (empty: all).
    record_kinds: tuple[RecordKind, ...] = ()
    memory_types: tuple[MemoryType, ...] = ()
    fusion: FusionWeights = field(default_factory=FusionWeights)
    # Multipliers of the fused score by record kind and by memory type (1 when absent).
    kind_weights: Mapping[str, float] = field(default_factory=dict)
    type_weights: Mapping[str, float] = field(default_factory=dict)
    # With a half-life, a record's score is multiplied by 0.5 + 0.5 * 2^(-age / half-life):
    # older records weigh down to half, never to nothing.
    recency_half_life_days: float | None = None

    def weight(self, record_kind: str, memory_type: str | None, age_days: float) -> float:
        weight = self.kind_weights.get(record_kind, 1.0)
        if memory_type is not None:
            weight *= self.type_weights.get(memory_type, 1.0)
        if self.recency_half_life_days is not None:
            weight *= 0.5 + 0.5 * 2 ** (-max(0.0, age_days) / self.recency_half_life_days)
        return weight


# Lexical weighed above dense: on conversational memory BM25 over stemmed terms finds the
# evidence more often than the small embedding model, and fusing both beats either
# (docs/retrieval.md has the measurements).
HYBRID = FusionWeights(dense=1.0, lexical=1.5)

PROFILES: dict[str, Profile] = {
    profile.name: profile for profile in (
        Profile("default", "every kind and type, no recency preference", fusion=HYBRID),
        Profile(
            "planning", "what was decided and how things are done here",
            record_kinds=("memory", "run_digest"),
            memory_types=("decision", "commitment", "pattern", "lesson", "preference",
                          "fact"),
            fusion=HYBRID,
            type_weights={"decision": 1.3, "commitment": 1.2, "pattern": 1.2, "lesson": 1.1},
            recency_half_life_days=90.0,
        ),
        Profile(
            "incident", "what fixed this last time",
            record_kinds=("fix_pattern", "run_digest", "memory"),
            memory_types=("lesson", "pattern", "fact", "decision"),
            fusion=HYBRID,
            kind_weights={"fix_pattern": 1.5, "run_digest": 1.2},
            type_weights={"lesson": 1.2},
            recency_half_life_days=30.0,
        ),
        Profile(
            "handoff", "where things stand",
            record_kinds=("memory", "run_digest"),
            memory_types=("handoff", "commitment", "decision", "fact"),
            fusion=HYBRID,
            kind_weights={"run_digest": 1.2},
            type_weights={"handoff": 1.5, "commitment": 1.3},
            recency_half_life_days=7.0,
        ),
    )
}


def age_in_days(created_at: datetime, now: datetime) -> float:
    return max(0.0, (now - created_at).total_seconds() / 86400)
