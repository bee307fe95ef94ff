"""Clusters: find the memories that say the same thing and merge each group into one.

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

import hashlib
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import hdbscan
import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from memstream_client.events import (
    MAX_RELATED_IDS,
    MAX_TAGS,
    MemoryType,
    RecordKind,
    ReviewState,
    Scope,
)
from processors.consolidation.candidates import (
    ConsolidationCandidate,
    ConsolidationSettings,
    PartitionKey,
    partition_key,
)
from processors.consolidation.restatements import (
    Traits,
    candidate_traits,
    distinct,
    near_duplicate,
    sentences,
    speaker_of,
)

FloatMatrix = npt.NDArray[np.float64]
FloatVector = npt.NDArray[np.float64]

# What a memory.write accepts: a merge must stay writable as one memory.
MAX_TEXT_CHARS = 8000
_REVIEW_STRENGTH: Mapping[ReviewState, int] = {"approved": 2, "draft": 1, "deprecated": 0}
# Norm under which a PCA-projected row is the centre itself, the rest being float noise.
_CENTRE = 1e-9
# Rows per matrix product in the neighbour search: 512 x 10k cosines are 20 MB in float32.
_NEIGHBOUR_BLOCK = 512




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


def merged_record_id(namespace: str, member_ids: Iterable[str]) -> str:
    """The replacement's id, the same whatever order the members come in."""
    # The unit separator cannot occur in a namespace or a record id (as in
    # client/memstream_client/ids.py).
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
    traits = [candidate_traits(candidate) for candidate in candidates]
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
           traits: Sequence[Traits], record_ids: Sequence[str],
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


def _guarded_rows(unit: FloatMatrix, background: FloatVector, traits: Sequence[Traits],
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
        and not distinct(traits[medoid], traits[row], settings))
        for row in range(len(unit))])
    conflicting: dict[int, list[int]] = {row: [] for row in range(len(unit))}
    for row in range(len(unit)):
        for other in range(row + 1, len(unit)):
            if distinct(traits[row], traits[other], settings):
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
