"""Consolidation: find the memories that say the same thing and merge each group into one.

`find_clusters` groups duplicates within a partition (namespace, scope, owner, record kind,
memory type): PCA to 64 dimensions, HDBSCAN, then a guard in the original embedding space that
keeps a member only when it is close to the cluster's medoid and to the rest of the cluster, and
is not distinct from another member by rule: a value that differs (number, identifier, weekday,
month, relative time), another speaker, a question beside a statement, a time-relative text of
another day, or another turn of the same speaker (issue 12). "Close to the rest" is judged
on locally scaled cosines: the bar rises where memories crowd together (a topic with many
distinct facts) and falls where they are sparse (a paraphrase with no look-alikes around).
`merge_cluster` turns one cluster into one replacement memory: the medoid's text as the
canonical statement, plus the sentences of the others that are not near-duplicates of a kept
one.

Everything here is a pure function of its inputs: the same memories and vectors give the same
clusters and the same replacement (text, id and all), whatever order they come in, so that a
re-run of the same trigger changes nothing.

Measured on bench/data/consolidation_eval.jsonl (`python -m bench.consolidation_eval`): see
bench/data/README.md for the figures and the settings tried.
"""

from __future__ import annotations

import functools
import hashlib
import re
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Literal

import hdbscan
import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from processors.lexical import STOP_WORDS, stem
from schemas.events import (
    MAX_RELATED_IDS,
    MAX_TAGS,
    MemoryType,
    RecordKind,
    ReviewState,
    Scope,
)

FloatMatrix = npt.NDArray[np.float64]
FloatVector = npt.NDArray[np.float64]
PartitionKey = tuple[str, Scope, str | None, RecordKind, MemoryType | None, str | None,
                     str | None]

# What a memory.write accepts: a merge must stay writable as one memory.
MAX_TEXT_CHARS = 8000
_REVIEW_STRENGTH: Mapping[ReviewState, int] = {"approved": 2, "draft": 1, "deprecated": 0}
# Norm under which a PCA-projected row is the centre itself, the rest being float noise.
_CENTRE = 1e-9
# Rows per matrix product in the neighbour search: 512 x 10k cosines are 20 MB in float32.
_NEIGHBOUR_BLOCK = 512


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
    # Guard, in the original space: a member's plain cosine to the medoid. A floor that local
    # scaling does not lower: without it, a pair at cosine 0.55 among unrelated memories
    # (backgrounds near 0.1) would be scaled to 0.70. The set has no sparse corner to show it:
    # there 0.65, or no floor, gives precision 0.966 and recall 0.814 against 0.967 and 0.807 ...
    medoid_cosine: float = 0.70
    # ... and its mean locally scaled cosine to the other members (below). Lower raises recall
    # and costs precision fast: same-topic distinct facts sit at 0.75-0.9 with this model.
    # 0.69 sits between two cliffs on the evaluation set: 0.68 lets look-alikes of other facts
    # into three groups (precision 0.945), 0.70 loses reworded paraphrases (recall 0.784).
    mean_cosine: float = 0.69
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
    reference_cosine: float = 0.60
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


@dataclass(frozen=True)
class MemberAttribution:
    """Who said a merged member, where it came from and when: kept in the merge's body, so
    that merging never loses a member's attribution (its text may be dropped as a
    near-duplicate sentence)."""

    record_id: str
    # The "Name:" its text starts with, lower case, if any.
    speaker: str | None
    agent_id: str | None
    source_ref: str | None
    occurred_at: datetime

    def as_json(self) -> dict[str, str | None]:
        return {"record_id": self.record_id, "speaker": self.speaker, "agent_id": self.agent_id,
                "source_ref": self.source_ref, "occurred_at": self.occurred_at.isoformat()}


@dataclass(frozen=True)
class MergedMemory:
    """The replacement of one cluster: written as a new memory, its members superseded by it."""

    record_id: str
    namespace: str
    scope: Scope
    agent_id: str | None
    record_kind: RecordKind
    memory_type: MemoryType | None
    title: str | None
    text: str
    tags: tuple[str, ...]
    related_ids: tuple[str, ...]
    review_state: ReviewState
    medoid_id: str
    # Sorted: the records this one supersedes.
    member_ids: tuple[str, ...]
    source_event_ids: tuple[str, ...]
    # The newest member's, so that a re-run builds the very same record.
    created_at: datetime
    # One per member, in the order of member_ids.
    attributions: tuple[MemberAttribution, ...] = ()
    # The members' (the partition's): a merge stays within one repo and security scope.
    repo: str | None = None
    security_scope: str | None = None

    @property
    def member_source_refs(self) -> tuple[str, ...]:
        """The members' source refs, each once, in the order of member_ids."""
        return tuple(dict.fromkeys(attribution.source_ref for attribution in self.attributions
                                   if attribution.source_ref is not None))

    @property
    def provenance(self) -> tuple[str, ...]:
        """Every member record id, then every source event id of the members."""
        return self.member_ids + self.source_event_ids


def partition_key(candidate: ConsolidationCandidate) -> PartitionKey:
    """Clusters never cross this: namespaces are isolated, a personal vault is its owner's,
    a lesson is not merged into a decision however alike they read, and a merge keeps its
    members' repo and security scope."""
    return (candidate.namespace, candidate.scope, candidate.agent_id, candidate.record_kind,
            candidate.memory_type, candidate.repo, candidate.security_scope)


def merged_record_id(namespace: str, member_ids: Iterable[str]) -> str:
    """The replacement's id, the same whatever order the members come in."""
    # The unit separator cannot occur in a namespace or a record id (as in processors/ids.py).
    parts = ("merged", namespace, *sorted(member_ids))
    return f"mem_{hashlib.sha256(chr(31).join(parts).encode()).hexdigest()[:24]}"


def reduce(vectors: npt.ArrayLike, dims: int = 64) -> FloatMatrix:
    """PCA projection of the rows onto their `dims` main axes (fewer when the rows span
    fewer): numpy SVD of the centred rows' scatter matrix, each axis signed so that its
    largest loading is positive, which makes the result the same from run to run."""
    matrix = np.asarray(vectors, dtype=np.float64)
    if matrix.ndim != 2:
        raise ValueError(f"vectors must be a 2-d array, got shape {matrix.shape}")
    centred = matrix - matrix.mean(axis=0)
    # n centred rows span at most n - 1 directions; the others are noise of arbitrary sign.
    keep = max(0, min(dims, matrix.shape[0] - 1, matrix.shape[1]))
    # One BLAS thread: on a busy 2-core machine the threaded pool spins and stalls (measured
    # for 10k x 384: 0.08 s steady on one thread, 0.1-1.8 s on two).
    with threadpool_limits(limits=1, user_api="blas"):
        # The scatter matrix (d x d) has the rows' axes and is 8x faster to decompose than
        # the rows; only the leading axes are kept, where squaring the condition number
        # costs no precision that matters.
        _, _, axes = np.linalg.svd(centred.T @ centred)
        axes = axes[:keep]
        signs = np.sign(axes[np.arange(keep), np.argmax(np.abs(axes), axis=1)])
        projected: FloatMatrix = centred @ (axes * signs[:, None]).T
    return projected


def neighbour_cosines(unit: npt.ArrayLike, rows: Sequence[int], rank: int) -> FloatVector:
    """For each of `rows`, its cosine to its `rank`-th nearest other row of `unit` (unit
    vectors, more than `rank` of them): the background that local scaling compares with.

    A value, not a neighbour, so ties cannot make it depend on the row order; rounded to 1e-6,
    so that neither can the float noise of a product, which varies with a row's place in a
    block: identical memories get identical backgrounds.
    """
    matrix = np.asarray(unit, dtype=np.float32)
    if not 1 <= rank < len(matrix):
        raise ValueError(f"rank must lie in [1, {len(matrix) - 1}], got {rank}")
    found = np.empty(len(rows))
    # float32 halves the time of the products (measured for 6k of 10k rows: 0.9 s against
    # 1.7 s), and a background needs no more than its first few digits.
    with threadpool_limits(limits=1, user_api="blas"):
        for start in range(0, len(rows), _NEIGHBOUR_BLOCK):
            block = list(rows[start:start + _NEIGHBOUR_BLOCK])
            cosines = matrix[block] @ matrix.T
            cosines[np.arange(len(block)), block] = -np.inf
            found[start:start + len(block)] = np.partition(cosines, -rank, axis=1)[:, -rank]
    rounded: FloatVector = np.round(found, 6)
    return rounded


def locally_scaled(similarity: npt.ArrayLike, background: npt.ArrayLike,
                   settings: ConsolidationSettings) -> FloatMatrix:
    """Cosines lowered where the two memories' mean background lies above the reference
    cosine and raised where it lies below, by `settings.local_scaling` times the gap."""
    cosines = np.asarray(similarity, dtype=np.float64)
    around = np.asarray(background, dtype=np.float64)
    gap = (around[:, None] + around[None, :]) / 2 - settings.reference_cosine
    scaled: FloatMatrix = cosines - settings.local_scaling * gap
    return scaled


def find_clusters(candidates: Sequence[ConsolidationCandidate], vectors: npt.ArrayLike,
                  settings: ConsolidationSettings | None = None, *,
                  timings: dict[str, float] | None = None) -> list[list[int]]:
    """Groups of duplicates, as indices into `candidates` (rows of `vectors`): members sorted,
    groups sorted by their first member; a memory in no group has no duplicate.

    `timings`, when given, receives the seconds spent in "reduce", "hdbscan", "neighbours"
    (the backgrounds of local scaling) and "guard".
    """
    settings = settings or ConsolidationSettings()
    spent = timings if timings is not None else {}
    for step in ("reduce", "hdbscan", "neighbours", "guard"):
        spent[step] = 0.0
    unit = _unit_rows(vectors, len(candidates))
    partitions: dict[PartitionKey, list[int]] = {}
    for index, candidate in enumerate(candidates):
        partitions.setdefault(partition_key(candidate), []).append(index)
    traits = [_traits(candidate) for candidate in candidates]
    record_ids = [candidate.record_id for candidate in candidates]
    background = np.full(len(candidates), settings.reference_cosine)
    clusters: list[list[int]] = []
    for members in partitions.values():
        found = _density_clusters(unit[members], settings, spent)
        started = time.perf_counter()
        # Only the memories in a density cluster reach the guard: the others need none.
        clustered = sorted({row for rows in found for row in rows})
        if clustered and settings.local_scaling and len(members) > settings.neighbour_rank:
            background[[members[row] for row in clustered]] = neighbour_cosines(
                unit[members], clustered, settings.neighbour_rank)
        guarding = time.perf_counter()
        spent["neighbours"] += guarding - started
        for rows in found:
            clusters.extend(_guard([members[row] for row in rows], unit, background, traits,
                                   record_ids, settings))
        spent["guard"] += time.perf_counter() - guarding
    return sorted(sorted(cluster) for cluster in clusters)


def merge_cluster(members: Sequence[ConsolidationCandidate], vectors: npt.ArrayLike,
                  settings: ConsolidationSettings | None = None) -> MergedMemory:
    """One replacement memory for a cluster (at least two members of one partition)."""
    settings = settings or ConsolidationSettings()
    if len(members) < 2:
        raise ValueError("a merge needs at least two members")
    if len({partition_key(member) for member in members}) != 1:
        raise ValueError("a cluster must not cross namespaces, scopes, owners, kinds or types")
    if len({member.record_id for member in members}) != len(members):
        raise ValueError("a record appears twice in the cluster")
    medoid = _medoid(_cosines(_unit_rows(vectors, len(members))),
                     [member.record_id for member in members])
    # The medoid, then the others oldest first: "first appearance" follows time.
    others = sorted((member for i, member in enumerate(members) if i != medoid),
                    key=lambda member: (member.created_at, member.record_id))
    ordered = [members[medoid], *others]
    head = ordered[0]
    member_ids = tuple(sorted(member.record_id for member in members))
    return MergedMemory(
        record_id=merged_record_id(head.namespace, member_ids),
        namespace=head.namespace,
        scope=head.scope,
        agent_id=head.agent_id,
        repo=head.repo,
        security_scope=head.security_scope,
        record_kind=head.record_kind,
        memory_type=head.memory_type,
        title=next((member.title for member in ordered if member.title), None),
        text=_merged_text(head.text, [member.text for member in ordered[1:]],
                          settings.sentence_jaccard),
        tags=tuple(dict.fromkeys(tag for member in ordered for tag in member.tags))[:MAX_TAGS],
        related_ids=_related_ids(ordered, set(member_ids)),
        review_state=max((member.review_state for member in members),
                         key=_REVIEW_STRENGTH.__getitem__),
        medoid_id=head.record_id,
        member_ids=member_ids,
        source_event_ids=tuple(dict.fromkeys(
            source for member in ordered for source in member.source_event_ids)),
        created_at=max(member.created_at for member in members),
        attributions=tuple(attribution_of(member) for member in sorted(
            members, key=lambda member: member.record_id)),
    )


def attribution_of(member: ConsolidationCandidate) -> MemberAttribution:
    return MemberAttribution(record_id=member.record_id, speaker=speaker_of(member.text),
                             agent_id=member.agent_id, source_ref=member.source_ref,
                             occurred_at=member.created_at)


def pending_supersessions(candidates: Sequence[ConsolidationCandidate]) -> dict[str, str]:
    """Live records that a live merge already replaces: record id -> the merge's id.

    A merge names the records it replaced among its provenance ids. A run that stopped after
    writing a merge but before superseding its members leaves both live, and clustering them
    again would merge the merge: supersede these and leave them out of clustering instead,
    and the re-run finishes the interrupted one.
    """
    live = {candidate.record_id for candidate in candidates}
    return dict(sorted(
        (source, candidate.record_id) for candidate in candidates
        for source in candidate.source_event_ids
        if source in live and source != candidate.record_id))


def sentences(text: str) -> list[str]:
    """The sentences of a text: split at line breaks and at . ! ? before a capital or digit."""
    return [part.strip() for part in SENTENCE_BREAK.split(text) if part.strip()]


def near_duplicate(first: str, second: str, jaccard: float) -> bool:
    """Whether two sentences state the same fact, by a lexical measure alone: their content
    words overlap (token-set Jaccard >= `jaccard`), both or neither denies something, and
    they name no conflicting anchors. Stricter than the guard's negation rule: a sentence
    dropped from a merge must not take a denial with it ("… the VPN, not the bastion")."""
    first_words, second_words = content_words(first), content_words(second)
    union = first_words | second_words
    if not union or len(first_words & second_words) / len(union) < jaccard:
        return False
    if bool(polarity(first).denied) != bool(polarity(second).denied):
        return False
    return not _conflict(anchors_of(first), anchors_of(second))


# ---------------------------------------------------------------------------- clustering


def _unit_rows(vectors: npt.ArrayLike, rows: int) -> FloatMatrix:
    matrix = np.asarray(vectors, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != rows:
        raise ValueError(f"expected one vector per candidate ({rows}), got shape {matrix.shape}")
    norms = np.linalg.norm(matrix, axis=1)
    if not np.all(np.isfinite(norms)) or np.any(norms == 0):
        raise ValueError("every candidate needs a usable vector (finite, non-zero)")
    unit: FloatMatrix = matrix / norms[:, None]
    return unit


def _density_clusters(unit: FloatMatrix, settings: ConsolidationSettings,
                      spent: dict[str, float], *, whole: bool = True) -> list[list[int]]:
    """HDBSCAN's clusters of the rows, as row indices; noise belongs to none. `whole`: the
    rows may form one single cluster (they are a partition, not a cluster already)."""
    if len(unit) < settings.min_cluster_size:
        return []
    started = time.perf_counter()
    reduced = reduce(unit, settings.reduce_dims)
    # A row at the centre (up to float noise) has no direction to normalise to.
    central = np.linalg.norm(reduced, axis=1) < _CENTRE
    reduced_at = time.perf_counter()
    spent["reduce"] += reduced_at - started
    if central.all():
        # All rows identical: one group, whatever its size (the guard's work is linear then).
        return [list(range(len(unit)))]
    # Back on the unit sphere, Euclidean distance orders pairs as cosine does (measured:
    # raw recall 0.95 against 0.86 on the un-normalised projection).
    reduced[~central] /= np.linalg.norm(reduced[~central], axis=1)[:, None]
    reduced[central] = 0.0
    labels = hdbscan.HDBSCAN(
        min_cluster_size=settings.min_cluster_size,
        min_samples=settings.min_samples,
        cluster_selection_method=settings.cluster_selection,
        # Without it a partition that is one group of duplicates (two alike memories alone
        # in their partition) would stay noise. Within a cluster, it must not be the answer:
        # that guarantees each re-clustering returns smaller clusters.
        allow_single_cluster=whole,
        # Exact minimum spanning tree (Boruvka's is approximate), and the fastest measured
        # on 10k x 64: 6.6 s against 8.6-9.3 s for the Boruvka variants.
        algorithm="prims_kdtree",
    ).fit_predict(reduced)
    spent["hdbscan"] += time.perf_counter() - reduced_at
    clusters: dict[int, list[int]] = {}
    for row, label in enumerate(labels.tolist()):
        if label >= 0:
            clusters.setdefault(label, []).append(row)
    found: list[list[int]] = []
    for rows in clusters.values():
        if len(rows) <= settings.max_group_size:
            found.append(rows)
        else:
            found += [[rows[row] for row in sub]
                      for sub in _density_clusters(unit[rows], settings, spent, whole=False)]
    return found


def _guard(cluster: list[int], unit: FloatMatrix, background: FloatVector,
           traits: Sequence[_Traits], record_ids: Sequence[str],
           settings: ConsolidationSettings) -> list[list[int]]:
    """Split a density cluster into groups that pass the guard, in the original space.

    HDBSCAN groups by topic as readily as by fact. A group keeps the medoid and the members
    within `medoid_cosine` of it that name no anchor conflicting with it; then, worst first,
    loses members whose mean locally scaled cosine to the others is under `mean_cosine` or
    that conflict with another member. The members left out are tried again as a group of
    their own.
    """
    groups: list[list[int]] = []
    pending = [cluster]
    while pending:
        members = pending.pop()
        kept = _guarded_rows(unit[members], background[members],
                             [traits[member] for member in members],
                             [record_ids[member] for member in members], settings)
        if len(kept) > 1:
            groups.append([members[row] for row in kept])
            kept_rows = set(kept)
            left_out = [member for row, member in enumerate(members) if row not in kept_rows]
        else:
            # A medoid kept alone is close to nothing: the others regroup without it.
            left_out = [member for row, member in enumerate(members) if row != kept[0]]
        if len(left_out) > 1:
            pending.append(left_out)
    return groups


def _guarded_rows(unit: FloatMatrix, background: FloatVector, traits: Sequence[_Traits],
                  record_ids: Sequence[str], settings: ConsolidationSettings) -> list[int]:
    """The rows of one candidate group that pass the guard; the medoid's always do.

    O(n^2) for n rows: the sums of scaled cosines to the kept rows and the count of
    conflicting kept rows are updated as rows are dropped, rather than recomputed.
    """
    similarity = _cosines(unit)
    medoid = _medoid(similarity, record_ids)
    scaled = locally_scaled(similarity, background, settings)
    kept = np.array([row == medoid or (
        similarity[medoid, row] >= settings.medoid_cosine
        and not _distinct(traits[medoid], traits[row], settings))
        for row in range(len(unit))])
    conflicting: dict[int, list[int]] = {row: [] for row in range(len(unit))}
    for row in range(len(unit)):
        for other in range(row + 1, len(unit)):
            if _distinct(traits[row], traits[other], settings):
                conflicting[row].append(other)
                conflicting[other].append(row)
    conflicts = np.array([sum(kept[other] for other in conflicting[row])
                          for row in range(len(unit))])
    sums = scaled[:, kept].sum(axis=1) - np.diag(scaled)
    while kept.sum() > 1:
        means = sums / (kept.sum() - 1)
        violating = kept & ((means < settings.mean_cosine) | (conflicts > 0))
        violating[medoid] = False
        if not violating.any():
            break
        worst = min(np.flatnonzero(violating).tolist(),
                    key=lambda row: (float(means[row]), record_ids[row]))
        kept[worst] = False
        sums -= scaled[:, worst]
        for other in conflicting[worst]:
            conflicts[other] -= 1
    return np.flatnonzero(kept).tolist()


def _cosines(unit: FloatMatrix) -> FloatMatrix:
    # Symmetrised: A @ A.T need not be bit-symmetric, and ties must not depend on row order.
    product = unit @ unit.T
    symmetric: FloatMatrix = (product + product.T) / 2
    return symmetric


def _medoid(similarity: FloatMatrix, record_ids: Sequence[str]) -> int:
    """The row with the highest mean cosine to the others. Ties (to 1e-9, so that float
    noise from the input order cannot decide them) go to the smallest record id."""
    if len(similarity) == 1:
        return 0
    means = (similarity.sum(axis=1) - np.diag(similarity)) / (len(similarity) - 1)
    return min(range(len(similarity)),
               key=lambda row: (-round(float(means[row]), 9), record_ids[row]))


# ---------------------------------------------------------------------------- anchors


@dataclass(frozen=True)
class _Anchors:
    """The values a text names, which a restatement keeps and a different fact changes."""

    # Each value with its occurrence ("3" named twice is ("3", 1) and ("3", 2)): "4 facts and
    # the last 3 notes of 3 agents" and "... the last 5 notes of 3 agents" differ in one value
    # although each value of the second is named in the first.
    numbers: frozenset[tuple[str, int]]
    identifiers: frozenset[str]
    # Weekdays, months and times relative to the moment of writing ("last week", "today"):
    # "the backup runs on Mondays" is not "... on Fridays".
    calendar: frozenset[str]


# A number as written in prose: 1,050  0.60  $50k  80%  24-hour. Not inside a word (BM25).
NUMBER_IN_PROSE = re.compile(r"(?<![\w.])(\d+(?:,\d{3})*(?:\.\d+)?)(?:(k)\b|(%)|(?![\w]))", re.I)
# "one" is left out: it is a pronoun as often as a number ("update that one").
NUMBER_WORDS = {
    "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7",
    "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12", "twenty": "20",
    "thirty": "30", "forty": "40", "fifty": "50", "sixty": "60", "seventy": "70",
    "eighty": "80", "ninety": "90",
}
# snake_case, dotted names (auth.py, memory.events), camelCase and PascalCase with an inner
# capital (JWTManager, PendingDiff), letters followed by digits (RS256, int8, Q3).
CODE_IDENTIFIER = re.compile(
    r"\b(?:[A-Za-z][A-Za-z0-9]*(?:[_.][A-Za-z0-9]+)+"
    r"|[a-z]+[A-Z][A-Za-z0-9]*|[A-Z]+[a-z]+[A-Z][A-Za-z0-9]*|[A-Z]{2,}[a-z][A-Za-z0-9]*"
    r"|[A-Za-z]+\d[A-Za-z0-9]*)\b")
# Dotted single letters are prose, not code: e.g, i.e, U.S.
ABBREVIATION = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")
# Weekdays in any case and plural ("on mondays"), months capitalised only: "may" and "march"
# are words too. Abbreviations as in dates ("Mon", "Sept").
WEEKDAY = re.compile(r"\b(mon|tues?|wed(?:nes)?|thu(?:rs?)?|fri|sat(?:ur)?|sun)(?:day)?s?\b",
                      re.I)
MONTH = re.compile(r"\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\b")
# Times that mean nothing without the moment the text was written.
RELATIVE_TIME = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|(?:last|this|next|past) (?:week(?:end)?|month|year"
    r"|night|morning|evening|time|(?:mon|tues|wednes|thurs|fri|satur|sun)day)"
    r"|(?:\w+ )?(?:days?|weeks?|months?|years?) ago|recently|lately|just now)\b", re.I)
MONTH_NAMES = frozenset({
    "jan", "january", "feb", "february", "mar", "march", "apr", "april", "may", "jun", "june",
    "jul", "july", "aug", "august", "sep", "sept", "september", "oct", "october", "nov",
    "november", "dec", "december"})


def anchors_of(text: str) -> _Anchors:
    """The numbers, code identifiers and calendar names a text names, normalised: "ten",
    "10" and "10.0" are one number, "80%" is 0.8, "$50k" is 50000, "Tues" is Tuesday."""
    values: list[str] = []
    for match in NUMBER_IN_PROSE.finditer(text):
        value = float(match.group(1).replace(",", ""))
        if match.group(2):
            value *= 1000
        elif match.group(3):
            value /= 100
        values.append(f"{value:g}")
    values += [NUMBER_WORDS[word] for word in re.findall(r"[a-z]+", text.lower())
               if word in NUMBER_WORDS]
    seen: Counter[str] = Counter()
    numbers: set[tuple[str, int]] = set()
    for named in values:
        seen[named] += 1
        numbers.add((named, seen[named]))
    identifiers = {match.group(0).lower() for match in CODE_IDENTIFIER.finditer(text)
                   if not ABBREVIATION.fullmatch(match.group(0))}
    calendar = {match.group(1).lower()[:3] for match in WEEKDAY.finditer(text)}
    calendar.update(match.group(1).lower() for match in MONTH.finditer(text)
                    if match.group(0).lower() in MONTH_NAMES)
    calendar.update(" ".join(match.group(0).lower().split())
                    for match in RELATIVE_TIME.finditer(text))
    return _Anchors(frozenset(numbers), frozenset(identifiers), frozenset(calendar))


def _conflict(first: _Anchors, second: _Anchors) -> bool:
    """Two texts of which each names a value the other does not state different facts,
    however alike they read: "retries 3 times" is not "retries 5 times", and "service 27
    needs flag 0" is not "service 27 needs flag 8", though both name 27. The embedding model
    puts such pairs at cosine 0.85-0.99, above most true paraphrases. A value named by one
    text alone is a detail added, not a contradiction: "retries 3 times, 10 s apart" restates
    "retries 3 times"."""
    return any(mine - theirs and theirs - mine for mine, theirs in (
        (first.numbers, second.numbers), (first.identifiers, second.identifiers),
        (first.calendar, second.calendar)))


# ---------------------------------------------------------------------------- who and when


@dataclass(frozen=True)
class _Traits:
    """What the guard compares beyond the vectors: a memory's values, who says it, whether it
    asks, and on which day it was said when its text only makes sense on that day."""

    anchors: _Anchors
    # The "Name:" a turn of a conversation starts with, lower case; None without one.
    speaker: str | None
    # Content words of what is said (after the speaker's name).
    words: frozenset[str]
    # What it says is so and what it says is not (after the speaker's name).
    polarity: Polarity
    asks: bool
    # The day it was recorded, and whether its text names a time relative to that day.
    day: date
    deictic: bool


# "Caroline: ...", "Dr Smith: ...", "agent-7: ...": one to three words before a colon at the
# very start. A longer run is a sentence with a colon in it ("Pin the SDK to 4.2: 4.3 ...").
SPEAKER = re.compile(r"\s*([A-Z][\w'.-]*(?: [A-Z][\w'.-]*){0,2}|[a-z][\w-]*\d[\w-]*):\s+\S")
# A trailing "[shares a photo of ...]" is a description, not what was said.
_TRAILING_BRACKETS = re.compile(r"(?:\s*\[[^\]]*\])+\s*$")


def speaker_of(text: str) -> str | None:
    """Who a memory quotes: its leading "Name:" (lower case), or None."""
    match = SPEAKER.match(text)
    return match.group(1).lower() if match else None


def asks(text: str) -> bool:
    """Whether a text ends by asking: its last sentence is a question. A question inside a
    statement ("Known error? Then retry") does not make one."""
    spoken = sentences(_TRAILING_BRACKETS.sub("", text))
    return bool(spoken) and spoken[-1].endswith("?")


def _traits(candidate: ConsolidationCandidate) -> _Traits:
    return _traits_of(candidate.text, candidate.created_at.date())


# The write-time twin check compares each new memory with its stored neighbours and its
# batch-mates, so one text meets the guard many times: read again at each meeting, the texts
# took 30% of the worker's event loop with twins on (docs/performance.md). Traits are
# immutable, so a reading is kept.
@functools.lru_cache(maxsize=4096)
def _traits_of(text: str, day: date) -> _Traits:
    speaker = SPEAKER.match(text)
    said = text[speaker.end(1) + 1:] if speaker else text
    return _Traits(
        anchors=anchors_of(text),
        speaker=speaker.group(1).lower() if speaker else None,
        words=frozenset(content_words(said)),
        polarity=polarity(said),
        asks=asks(text),
        day=day,
        deictic=RELATIVE_TIME.search(text) is not None,
    )


def restates(first: ConsolidationCandidate, second: ConsolidationCandidate,
             settings: ConsolidationSettings | None = None) -> bool:
    """Whether the guard lets two memories be one fact restated: the same partition, and
    nothing (a value, an opposite, a denial, a speaker, asking or telling, the day, the
    utterance) tells them apart. The vectors decide the rest."""
    settings = settings or ConsolidationSettings()
    return partition_key(first) == partition_key(second) and not _distinct(
        _traits(first), _traits(second), settings)


def _distinct(first: _Traits, second: _Traits, settings: ConsolidationSettings) -> bool:
    """Whether two memories cannot be one fact restated, whatever their vectors say: they
    differ in a value, name two opposites, one denies what the other asserts, they differ
    in who speaks, in asking or telling (a question and its answer are
    neighbours, not duplicates), in the day a time-relative text was said, or they are two
    different utterances of one speaker."""
    return (_conflict(first.anchors, second.anchors)
            or _opposed(first.words, second.words)
            or contradicts(first.polarity, second.polarity, settings.negation_coverage)
            or _speakers_differ(first, second)
            or first.asks != second.asks
            or _said_on_different_days(first, second)
            or _different_utterances(first, second, settings.utterance_jaccard))


def _opposed(first: frozenset[str], second: frozenset[str]) -> bool:
    """Each text naming one of a pair of opposites the other does not: "the job runs before
    the deploy" is not "... after the deploy", which the embedding model puts at cosine 0.9
    or more."""
    mine, theirs = first - second, second - first
    return any(OPPOSITE.get(word, frozenset()) & theirs for word in mine)


def _speakers_differ(first: _Traits, second: _Traits) -> bool:
    """Two speakers' turns are two utterances, however alike: merged, one would lose who said
    it. A memory with no speaker prefix matches one with a prefix only when it names that
    speaker itself ("Caroline said ..."), so that the merged text cannot drop the name; a
    label that the other text names ("Recency: ..." beside "Recency decays ...") is no
    speaker either."""
    if first.speaker == second.speaker:
        return False
    if first.speaker is not None and second.speaker is not None:
        return True
    named, other = (first, second) if first.speaker is not None else (second, first)
    assert named.speaker is not None
    return not content_words(named.speaker) <= other.words


def _different_utterances(first: _Traits, second: _Traits, jaccard: float) -> bool:
    """Quoted speech records what someone said at one moment. Two turns of one speaker are the
    same memory only when they are one turn recorded twice: said the same day in (nearly) the
    same words. Said on another day, or in other words on one topic, they are two turns, and a
    merge would lose one of them from the dialog."""
    if first.speaker is None or first.speaker != second.speaker:
        return False
    union = first.words | second.words
    shared = len(first.words & second.words) / len(union) if union else 1.0
    return first.day != second.day or shared < jaccard


def _said_on_different_days(first: _Traits, second: _Traits) -> bool:
    """"I went to the beach yesterday", said in May and again in June, is two outings."""
    return (first.deictic or second.deictic) and first.day != second.day


# ---------------------------------------------------------------------------- negation


@dataclass(frozen=True)
class Polarity:
    """What a text says is so and what it says is not: the content words it affirms and those
    it denies (each a light stem), a word it both affirms and denies left out of both ("the
    VPN is needed for deploys, not for reads" denies reads alone)."""

    asserted: frozenset[str]
    denied: frozenset[str]

    @property
    def words(self) -> frozenset[str]:
        return self.asserted | self.denied


# Where a negation's scope ends: a sentence, or a part of one set off by punctuation or a
# conjunction ("deploys need the VPN, but not the bastion"). "nor" opens a part of its own,
# which it negates: "neither A nor B" denies both.
_CLAUSE_BREAK = re.compile(
    r"[.!?](?:\s|$)|[,;:()\[\]\n]|\s[-\u2013\u2014]+\s"
    r"|\b(?:but|however|although|though|whereas|because|since|so|if|unless|when|while)\b"
    r"|(?=\bnor\b)", re.I)
# Words that deny what follows them in their clause: negations, and absence ("without",
# "missing": "a memory missing a usable vector" is "a memory without a usable vector") and
# cessation ("stopped", "no longer": what was so is so no more). Every "n't" negates too.
NEGATION_CUES = frozenset({
    "not", "no", "never", "none", "nobody", "nothing", "nowhere", "neither", "nor", "cannot",
    "without", "missing", "lack", "lacks", "lacking", "absent", "stopped", "ceased",
})
# Contrasts that deny what follows them: "A instead of B" and "A rather than B" say "A, not B".
_NEGATING_BEFORE = {"instead": "of", "rather": "than"}
# A negation that does not negate before these: "not only", "no matter", and exclusivity,
# which restates "only" ("accepts no other connections", "nothing else is kept"). And the
# word a negation takes along ("no longer", "no more"), which is no content of the clause.
_NOT_NEGATING = {"not": frozenset({"only", "just"}),
                 "no": frozenset({"matter", "doubt", "other"}),
                 "nothing": frozenset({"else"}), "nobody": frozenset({"else"})}
_TAKEN_ALONG = {"no": frozenset({"longer", "more"})}
# Words that only strengthen a negation ("not needed anymore", "not yet enabled").
NEGATION_FILLERS = frozenset({"anymore", "yet", "ever", "either", "any"})


def polarity(text: str) -> Polarity:
    """The affirmed and the denied content words of a text. A negation denies what follows
    it in its clause, not what comes before ("the VPN is no longer needed" denies needed,
    and is still about the VPN); each further negation in the clause flips it back, so a
    double negation affirms ("cannot be rebuilt without downtime" denies rebuilt, affirms
    downtime). Numbers are left out: their differences are the anchors' business."""
    affirmed: set[str] = set()
    negated: set[str] = set()
    for clause in _CLAUSE_BREAK.split(text.lower().replace("\u2019", "'")):
        words = _WORD.findall(clause)
        negations = 0
        for position, word in enumerate(words):
            before = words[position - 1] if position else ""
            after = words[position + 1] if position + 1 < len(words) else ""
            if _negates(word, after):
                negations += 1
            elif not (word in STOP_WORDS or word in NEGATION_FILLERS or word[0].isdigit()
                      or word in _TAKEN_ALONG.get(before, frozenset())):
                # Without a final e, "caches" and "caching" are one word (stem: cache, cach).
                (negated if negations % 2 else affirmed).add(stem(word).rstrip("e"))
    return Polarity(frozenset(affirmed - negated), frozenset(negated - affirmed))


def contradicts(first: Polarity, second: Polarity, coverage: float) -> bool:
    """Whether one text denies what the other asserts: it restates at least `coverage` of
    the other's content words and denies one of those the other asserts ("deploys need the
    VPN" and "deploys go through the bastion; the VPN is no longer needed"), which the
    embedding model puts at cosine 0.8 or more. Two texts that deny a word alike are
    negative statements of one thing ("the job does not run on weekends", "on weekends the
    job does not run"), and a denial of what the other does not say is a detail added
    ("deploys need the VPN, not the bastion" beside "deploys need the VPN")."""
    if first.denied & second.denied:
        return False
    return any(
        denying.denied & asserting.asserted
        and len(denying.words & asserting.words) >= coverage * len(asserting.words)
        for denying, asserting in ((first, second), (second, first)))


def _negates(word: str, following: str) -> bool:
    if word.endswith("n't") or _NEGATING_BEFORE.get(word) == following:
        return True
    return word in NEGATION_CUES and following not in _NOT_NEGATING.get(word, frozenset())


# ---------------------------------------------------------------------------- merging

SENTENCE_BREAK = re.compile(r"\n+|(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
_WORD = re.compile(r"[a-z0-9]+(?:[_.'][a-z0-9]+)*")
# Function words carry no fact; without them, Jaccard compares what the sentences say.
# Negations stay: "writes are not mandatory" is another fact than "writes are mandatory".
_STOP_WORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "for", "from", "if", "in", "into",
    "is", "it", "its", "may", "must", "of", "on", "or", "so", "than", "that", "the", "then",
    "this", "to", "was", "were", "when", "with",
})


_OPPOSITE_PAIRS = (
    ("before", "after"), ("earlier", "later"), ("early", "late"), ("first", "last"),
    ("enable", "disable"), ("enabled", "disabled"), ("on", "off"), ("up", "down"),
    ("allow", "deny"), ("allowed", "denied"), ("accept", "reject"), ("accepted", "rejected"),
    ("always", "never"), ("increase", "decrease"), ("increased", "decreased"),
    ("higher", "lower"), ("more", "less"), ("most", "least"), ("min", "max"),
    ("minimum", "maximum"), ("open", "closed"), ("start", "stop"), ("started", "stopped"),
    ("true", "false"), ("yes", "no"), ("success", "failure"), ("succeeded", "failed"),
    ("pass", "fail"), ("passed", "failed"), ("add", "remove"), ("added", "removed"),
    ("include", "exclude"), ("included", "excluded"), ("internal", "external"),
    ("public", "private"), ("read", "write"), ("input", "output"), ("old", "new"),
    ("older", "newer"), ("oldest", "newest"), ("left", "right"), ("above", "below"),
    ("inside", "outside"), ("valid", "invalid"), ("required", "optional"),
    ("sync", "async"), ("synchronous", "asynchronous"), ("staging", "production"),
    ("client", "server"), ("upstream", "downstream"), ("inbound", "outbound"),
    ("import", "export"), ("push", "pull"), ("lock", "unlock"), ("like", "dislike"),
    ("love", "hate"), ("buy", "sell"), ("win", "lose"), ("morning", "evening"),
    ("day", "night"), ("summer", "winter"), ("light", "dark"), ("fast", "slow"),
    ("faster", "slower"), ("big", "small"), ("bigger", "smaller"), ("long", "short"),
    ("longer", "shorter"), ("hot", "cold"), ("warm", "cool"), ("happy", "sad"),
)
OPPOSITE: dict[str, frozenset[str]] = {}
for _one, _other in _OPPOSITE_PAIRS:
    OPPOSITE[_one] = OPPOSITE.get(_one, frozenset()) | {_other}
    OPPOSITE[_other] = OPPOSITE.get(_other, frozenset()) | {_one}


def content_words(sentence: str) -> set[str]:
    return {word for word in _WORD.findall(sentence.lower()) if word not in _STOP_WORDS}


def _merged_text(canonical: str, others: Sequence[str], jaccard: float) -> str:
    """The canonical statement, then a line per other member with its distinct facts (its
    sentences that are not near-duplicates of one kept before), within MAX_TEXT_CHARS: facts
    that do not fit are left out, and provenance still names their records."""
    kept = sentences(canonical)
    lines = [canonical.strip()]
    used = len(lines[0])
    for text in others:
        facts = []
        for sentence in sentences(text):
            if not any(near_duplicate(sentence, seen, jaccard) for seen in kept):
                kept.append(sentence)
                facts.append(sentence)
        line = " ".join(facts)
        if line and used + 1 + len(line) <= MAX_TEXT_CHARS:
            lines.append(line)
            used += 1 + len(line)
    return "\n".join(lines)


def _related_ids(ordered: Sequence[ConsolidationCandidate], members: set[str]) -> tuple[str, ...]:
    """At most MAX_RELATED_IDS, the most often named first, ties by first appearance; the
    members themselves are left out (they are superseded by the merge)."""
    counts = Counter(related for member in ordered for related in dict.fromkeys(
        member.related_ids) if related not in members)
    first_seen = {related: position for position, related in enumerate(dict.fromkeys(
        related for member in ordered for related in member.related_ids))}
    ranked = sorted(counts, key=lambda related: (-counts[related], first_seen[related]))
    return tuple(ranked[:MAX_RELATED_IDS])
