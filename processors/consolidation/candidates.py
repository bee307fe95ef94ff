"""What consolidation takes: a live record as it sees it (`ConsolidationCandidate`), the
settings of finding duplicates, and the partition no cluster crosses."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from memstream_client.events import (
    MemoryType,
    RecordKind,
    ReviewState,
    Scope,
)
from processors.text.calibration import SIMILARITY

PartitionKey = tuple[str, Scope, str | None, RecordKind, MemoryType | None, str | None,
                     str | None]



@dataclass(frozen=True)
class ConsolidationCandidate:
    """One live record as consolidation sees it; its vector is passed alongside."""

    record_id: str
    namespace: str
    scope: Scope
    agent_id: str | None
    record_kind: RecordKind
    memory_type: MemoryType | None
    text: str
    title: str | None
    tags: tuple[str, ...]
    related_ids: tuple[str, ...]
    review_state: ReviewState
    # Provenance ids: the events the record came from, or the records a merge replaced.
    source_event_ids: tuple[str, ...]
    # When the memory was recorded (its event's occurred_at).
    created_at: datetime
    # Where the writer found it (a URL, a run id, a dialog turn): kept in a merge's body.
    source_ref: str | None = None
    repo: str | None = None
    security_scope: str | None = None


@dataclass(frozen=True)
class ConsolidationSettings:
    """How duplicates are found. The defaults are the one configuration measured on the
    evaluation set (bench/data/README.md); each field says what moving it does."""

    # PCA target. HDBSCAN on the raw 384-d vectors took 47 s for 10k against 9 s (issue 4),
    # for clusters a little better (on the set: precision 0.968, recall 0.821 at 384-d,
    # against 0.967 and 0.807).
    reduce_dims: int = 64
    # 2: a pair of duplicates is the most common case and must be able to form a cluster.
    min_cluster_size: int = 2
    # Neighbours a point needs to be dense, itself not counted: 2 already leaves an isolated
    # pair of duplicates as noise (measured at 10k: 58% of planted pairs found, against 99.8%).
    min_samples: int = 1
    # "eom" with a single cluster allowed also finds the one pair in a partition of three;
    # "leaf" finds none below five memories and loses 3 points of recall on the set.
    cluster_selection: Literal["leaf", "eom"] = "eom"
    # A density cluster larger than this is a topic, not a group of duplicates: it is
    # clustered again on its own, which also bounds the guard's cost (cubic at worst). A
    # larger group of near-identical memories is merged in parts, and the parts next time.
    max_group_size: int = 100
    # The three cosines below are the similarity model's, all-MiniLM-L6-v2
    # (processors/text/calibration.py), whose vectors consolidation clusters.
    # Guard, in the original space: a member's plain cosine to the medoid. A floor that local
    # scaling does not lower: without it, a pair at cosine 0.55 among unrelated memories
    # (backgrounds near 0.1) would be scaled to 0.70. The set has no sparse corner to show it:
    # there 0.65, or no floor, gives precision 0.966 and recall 0.814 against 0.967 and 0.807 ...
    medoid_cosine: float = SIMILARITY.consolidation_medoid
    # ... and its mean locally scaled cosine to the other members (below). Lower raises recall
    # and costs precision fast: same-topic distinct facts sit at 0.75-0.9 with MiniLM.
    # 0.69 sits between two cliffs on the evaluation set: 0.68 lets look-alikes of other facts
    # into three groups (precision 0.945), 0.70 loses reworded paraphrases (recall 0.784).
    mean_cosine: float = SIMILARITY.consolidation_mean
    # Local scaling (CSLS, Conneau et al. 2018): the cosine of two memories is lowered by
    # `local_scaling` times how far the mean of their backgrounds lies above
    # `reference_cosine`, and raised as far when below. A memory's background is its cosine to
    # its `neighbour_rank`-th nearest other memory of the partition: high in a topic crowded
    # with distinct facts, low for a memory with no look-alikes. 0 turns the scaling off.
    # On the evaluation set the best recall at precision >= 0.96 is 0.81 with it and 0.73
    # without; weights 0.2-0.4 and ranks 3-6 do about as well, while a rank of 7 or more or a
    # full CSLS (weight 1) falls below plain cosine. Cross-validated, the gain shrinks to 0.03
    # of recall (bench/data/README.md).
    local_scaling: float = 0.3
    # 4: past the duplicates of most memories of the set (3 in a group of 4, its commonest
    # size), so that the background is mostly the nearest distinct memories. Where duplicates
    # come in pairs it reaches further out: a lower background, a slightly lower bar.
    neighbour_rank: int = 4
    # The background at which the scaling changes nothing; also every memory's background in
    # a partition of `neighbour_rank` memories or fewer, which has no such neighbour.
    reference_cosine: float = SIMILARITY.consolidation_reference
    # Token-set Jaccard (content words) from which two sentences are the same fact.
    sentence_jaccard: float = 0.65
    # The same, from which two turns of one speaker ("Name: ...") said on one day are one
    # utterance recorded twice. A speaker's turns on one topic are not restatements of each
    # other, however close their vectors: on LoCoMo's dev conversations the turns that the
    # vectors alone would merge share a median 0.16 of their content words, while restated
    # memories of the evaluation set share 0.7 or more (bench/data/README.md).
    utterance_jaccard: float = 0.6
    # Share of a text's content words that another must restate for a denial of one of them
    # to veto the pair (`contradicts`). On the evaluation set with its negation pairs
    # (bench/data/README.md), 0.8 keeps all 24 affirmed/negated pairs apart for 5 true pairs;
    # 0.75 costs 10 more true pairs, 0.85 lets 3 negated pairs merge (precision 0.967).
    negation_coverage: float = 0.8

    def __post_init__(self) -> None:
        if self.reduce_dims < 1 or self.min_samples < 1:
            raise ValueError("reduce_dims and min_samples must be at least 1")
        if not 2 <= self.min_cluster_size <= self.max_group_size:
            raise ValueError("min_cluster_size must be at least 2 (a cluster is a merge) and "
                             "at most max_group_size")
        if not all(-1 <= cosine <= 1 for cosine in (
                self.medoid_cosine, self.mean_cosine, self.reference_cosine)):
            raise ValueError("cosine thresholds lie in [-1, 1]")
        if self.local_scaling < 0 or self.neighbour_rank < 1:
            raise ValueError("local_scaling must not be negative, neighbour_rank at least 1")
        if not all(0 < share <= 1 for share in (
                self.sentence_jaccard, self.utterance_jaccard, self.negation_coverage)):
            raise ValueError("sentence_jaccard, utterance_jaccard and negation_coverage lie "
                             "in (0, 1]")



def partition_key(candidate: ConsolidationCandidate) -> PartitionKey:
    """Clusters never cross this: namespaces are isolated, a personal vault is its owner's,
    a lesson is not merged into a decision however alike they read, and a merge keeps its
    members' repo and security scope."""
    return (candidate.namespace, candidate.scope, candidate.agent_id, candidate.record_kind,
            candidate.memory_type, candidate.repo, candidate.security_scope)

