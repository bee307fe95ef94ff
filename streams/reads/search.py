"""Search: hybrid recall within one namespace, typed in (`SearchQuery`), typed out (`Found`,
`Searched`).

Two ranked lists, a dense one (the query's embedding, cosine) and a lexical one (BM25 over
stemmed terms, IDF from the namespace's own records), fused by weighted min-max scores and
weighed by the recall profile (processors/recall/ranking.py). Both lists come from the index;
if any part of that fails, the same algorithm runs over the records in Postgres
(stores/index/postgres_search.py) and the result says `degraded`.

A hit shows when it is relevant enough: `min_score` is a floor on its relevance
(processors/recall/ranking.py `relevance`), which both signals feed: its own support (the
embedding's cosine, and the share of the query's information its words hold) beside the
best support among the query's candidates, so that 0.5 means "worth showing" and a question
the namespace knows nothing about finds nothing.

Without a query, a search by related ids (seed 000's `card_memory_search`) reads the records
that list any of them from Postgres, those that list the most of the ids first, then the
newest, with the same visibility and filters.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial

import numpy as np

from processors.knowledge.graph import EXPANDED_FROM, Reached, is_entity, reached_score
from processors.recall.adaptive_scoring import (
    AdaptiveScore,
    MemoryUse,
    adaptive_score,
    blend_factor,
    rerank,
)
from processors.recall.confidence import confident_enough
from processors.recall.contested import (
    Contest,
    Ranked,
    corrected,
    corrections_missing,
    place_taken,
    settled,
)
from processors.recall.ranking import (
    Fused,
    FusionWeights,
    Profile,
    age_in_days,
    fuse,
    query_support,
    relevance,
)
from processors.text.embedding import Vector
from processors.text.lexical import (
    context_texts,
    coverage,
    query_term_ids,
    query_vector,
    term_presence,
)
from stores.index.postgres_search import AsOfSearch, RecordsSearch
from stores.index.protocol import SearchIndex, SearchScope, TermCounts
from stores.recall.scoring_configs import CurrentScoring
from stores.record_versions import PersonalReader
from stores.records import FoundRecord, RelatedRecord
from streams.plumbing.runtime import Runtime
from streams.reads.graph import walk

log = logging.getLogger(__name__)

DEFAULT_LIMIT = 5

DEFAULT_MIN_SCORE = 0.5

# Candidates taken from each list, at least: fusion needs more than the hits it returns,
# and min-max scaling a long enough list. The lexical list is cheap to lengthen (an inverted
# index); a longer dense one costs the graph search more.
DENSE_CANDIDATES = 50

LEXICAL_CANDIDATES = 100



@dataclass(frozen=True)
class Viewpoint:
    """Which memory a read looks at: memory as it stood at `as_of` (None: now), and the
    confidence a record needs to be shown (None: its tier's threshold,
    processors/recall/confidence.py)."""

    as_of: datetime | None = None
    min_confidence: float | None = None


NOW = Viewpoint()


@dataclass(frozen=True)
class SearchQuery:
    """A recall's question and where it looks: its scope (namespace, limit, min_score,
    filters, the agent whose personal memories it reads), its profile, the run it is made for
    (searches per run are budgeted), whether each hit says how its score was made, the
    memory it looks at, and the hops it follows from its best hits along links and shared
    entities. `narrowed`: a filter the caller chose narrowed it, so an empty answer may be
    the filter's rather than memory's (processors/recall/gaps.py). Without a query, it is a
    search by `scope.related_ids` alone."""

    query: str
    scope: SearchScope
    profile: Profile
    run_id: str | None = None
    explain: bool = False
    viewpoint: Viewpoint = NOW
    expand: int = 0
    narrowed: bool = False

    @property
    def asked(self) -> str:
        """What the search asked, as the retrieval log keeps it: its query, or the related
        ids it searched by."""
        return self.query or "related_id=" + ",".join(self.scope.related_ids)


@dataclass(frozen=True)
class Blend:
    """How an agent's use of a record moved its score: the adaptive score and its parts, the
    factor the raw score was multiplied by, and the version of the config that said so."""

    adaptive: AdaptiveScore
    factor: float
    config_version: int



@dataclass(frozen=True)
class Hit:
    """A record found: its place in both lists, the profile's weight, its score (fused,
    weighed, and blended with the agent's adaptive score when there is one), its similarity,
    its support and relevance."""

    record: FoundRecord
    fused: Fused
    score: float
    similarity: float
    relevance: float
    weight: float = 1.0
    support: float = 1.0
    blend: Blend | None = None
    # How a record reached from a hit's links was reached (processors/knowledge/graph.py).
    via: Reached | None = None
    # The hits it contests, pending review (processors/recall/contested.py): it restated them
    # with another value.
    corrects: tuple[Contest, ...] = ()



@dataclass(frozen=True)
class Found:
    hits: list[Hit]
    # True when the index failed and Postgres answered.
    degraded: bool
    # The query's embedding, as searched.
    vector: Vector



@dataclass(frozen=True)
class QueryTerms:
    """A query's terms and the namespace's counts of them: what lexical coverage weighs."""

    term_ids: list[int]
    counts: TermCounts



@dataclass(frozen=True)
class Candidate:
    item: Fused
    record: FoundRecord
    similarity: float
    support: float
    weight: float
    blend: Blend | None

    @property
    def raw(self) -> float:
        """The fused score weighed by the profile, before any blend."""
        return self.item.score * self.weight

    @property
    def score(self) -> float:
        return self.raw if self.blend is None else self.raw * self.blend.factor



@dataclass(frozen=True)
class Scoring:
    """The adaptive scoring a search blends in: for this agent, with this config."""

    agent_id: str
    current: CurrentScoring

    def blends(self, used: Mapping[str, MemoryUse], record_ids: Sequence[str],
               now: datetime) -> dict[str, Blend]:
        """The blend of each record from the agent's use of it (`used`; a record it never
        used has the score of no use)."""
        # Most candidates were never used by the agent: their blend is one and the same.
        unused = blend_of(NO_USE, self.current, now)
        return {record_id: blend_of(used[record_id], self.current, now)
                if record_id in used else unused for record_id in record_ids}



NO_USE = MemoryUse()



def blend_of(use: MemoryUse, current: CurrentScoring, now: datetime) -> Blend:
    """The blend an agent's use of a record makes with the namespace's config."""
    adaptive = adaptive_score(use, now, current.config)
    return Blend(adaptive, blend_factor(adaptive.score, current.config), current.version)



async def scoring_for(runtime: Runtime, namespace: str, agent_id: str | None) -> Scoring | None:
    """The scoring a search by `agent_id` blends in; None without an agent (scores are per
    agent), or when the namespace's config cannot be read (memory must not fail its caller
    over a ranking refinement)."""
    if agent_id is None:
        return None
    try:
        return Scoring(agent_id, await runtime.stores.scoring_configs.current(namespace))
    except Exception as exc:
        log.warning("could not read the scoring config of %s; ranking without it: %s",
                    namespace, exc)
        return None



async def hybrid_search(runtime: Runtime, index: SearchIndex, fallback: RecordsSearch,
                        text: str, scope: SearchScope, profile: Profile,
                        vector: Vector | None = None, viewpoint: Viewpoint = NOW) -> Found:
    """The best records within `scope` for `text`, from the index, or from Postgres when the
    index fails (fail open: memory must never make its caller fail while Postgres can
    answer). A hit shows when its relevance reaches `scope.min_score` and its confidence the
    viewpoint's threshold; hits are ranked by their score blended with the adaptive score of
    the agent the scope reads for. As of a past moment, the index and the records that left
    it since are searched, and each record is read as it stood then."""
    read_records = partial(runtime.stores.records.records_by_id, scope.namespace)
    wanted_states = frozenset(scope.review_states)
    searched: SearchIndex = fallback
    if viewpoint.as_of is not None:
        moment = viewpoint.as_of.timestamp()
        departed = fallback.departed_after(moment)
        index, searched = AsOfSearch(index, departed, moment), AsOfSearch(fallback, departed,
                                                                           moment)
        read_records = partial(runtime.stores.records.records_as_of, scope.namespace,
                               moment=viewpoint.as_of)
    thresholds = runtime.confidence_thresholds
    calibration = runtime.calibration
    weights = FusionWeights.calibrated(calibration)
    # The model runs in a thread while the index counts the query's terms.
    embedding = None if vector is not None else asyncio.ensure_future(
        runtime.embed([text], role="query"))
    scoring_read = asyncio.ensure_future(scoring_for(runtime, scope.namespace, scope.agent_id))
    try:
        fused, query_terms = await ranked(index, text, vector, embedding, scope, weights)
        degraded = False
    except Exception:
        log.exception("index search failed; answering from Postgres")
        fused, query_terms = await ranked(searched, text, vector, embedding, scope, weights)
        degraded = True
    if vector is None:
        assert embedding is not None
        vector = (await embedding)[0]
    scoring = await scoring_read
    now = datetime.now(UTC)
    read: list[Candidate] = []
    best = 0.0

    def shown() -> list[Candidate]:
        return [c for c in read if relevance(c.support, best) >= scope.min_score]

    # The records of the best candidates first, more only while the rest could still make
    # the cut (too few are shown, or the profile's weights and its blend could lift one
    # above the last shown): a search of 5 reads a few rows, not every candidate's. The
    # best support only grows as more are read, so what was shown stays shown. The blends
    # of all candidates are read at once, beside the first records (a few small rows): the
    # bound on what is left is then each one's own, not the largest blend there could be.
    # A quarter more than the limit (at least 5): on the pack bench's 100k memories no
    # search needed a second read, with an agent's scores one in six did; reading twice the
    # limit first cost a pack 2 ms or more (p50) in rows it never showed (docs/performance.md).
    step = scope.limit + max(scope.limit // 4, 5)
    first_records, blends = await asyncio.gather(
        read_records([item.record_id for item in fused[:step]]),
        blends_of(runtime, scoring, scope.namespace, [item.record_id for item in fused], now))
    reach = best_left(fused, blends)
    for start in range(0, len(fused), step):
        passing = shown()
        if len(passing) >= scope.limit and reach[start] * profile.max_weight <= \
                sorted(c.score for c in passing)[-scope.limit]:
            break
        part = fused[start:start + step]
        records = first_records if start == 0 else await read_records(
            [item.record_id for item in part])
        for item in part:
            record = records.get(item.record_id)
            # A point whose record is gone from Postgres is stale: the index is rebuildable.
            # As of a moment, a record's review state is the one it had then.
            if record is None or record.embedding is None \
                    or record.review_state not in wanted_states \
                    or not confident_enough(record.confidence, record.tier,
                                            viewpoint.min_confidence, thresholds):
                continue
            similarity = float(np.dot(record.embedding, vector))
            # Kept with the record when it was written; read from its texts if it was written
            # before that (or is read as an earlier version).
            held = record.held_terms if record.held_terms is not None else term_presence(
                record.text, record.title, context_texts(record.body), record.created_at)
            own = query_support(similarity, coverage(
                query_terms.term_ids, held, query_terms.counts.frequencies,
                query_terms.counts.documents), len(query_terms.term_ids), calibration)
            best = max(best, own)
            weight = profile.weight(record.record_kind, record.memory_type,
                                    age_in_days(record.created_at, now))
            read.append(Candidate(item, record, similarity, own, weight,
                                  blends.get(item.record_id)))
    passing = sorted(shown(), key=lambda c: (-c.raw, c.record.record_id))
    ranking = [(c.record.record_id, c.raw) for c in passing]
    if scoring is not None:
        # The adaptive score moves a hit only by its blend; min_score stays a floor on
        # relevance, which no rating changes.
        ranking = rerank(ranking, {c.record.record_id: c.blend.adaptive.score
                                   for c in passing if c.blend is not None},
                         scoring.current.config)
    by_id = {c.record.record_id: c for c in passing}
    hits = [Hit(c.record, c.item, score, c.similarity, relevance(c.support, best), c.weight,
                c.support, c.blend)
            for record_id, score in ranking[: scope.limit] for c in (by_id[record_id],)]
    return Found(hits, degraded, vector)



async def recall(runtime: Runtime, index: SearchIndex, fallback: RecordsSearch,
                 query: SearchQuery) -> Found:
    """The hits of a search with a query: hybrid, as of its viewpoint, with what their links
    reach when it asks to expand, and each contested hit below its correction."""
    found = await hybrid_search(runtime, index, fallback, query.query, query.scope,
                                query.profile, viewpoint=query.viewpoint)
    linked = await with_links(runtime, found, query.scope, query.expand, query.viewpoint)
    return await with_corrections(runtime, linked, query.scope, query.viewpoint)



async def with_corrections(runtime: Runtime, found: Found, scope: SearchScope,
                           viewpoint: Viewpoint) -> Found:
    """`found` with each contested hit (its invalidation waits for a reviewer) ranked below
    the memory that contests it, that memory brought in in its place when the question did
    not find it (kept to `scope` and the viewpoint's confidence), and each correction saying
    what it contests (processors/recall/contested.py); the best `scope.limit` of all. A hit
    that nothing contests costs nothing here; a correction that cannot be read leaves the
    hits as they are, marked (fail open)."""
    if all(hit.record.contested is None for hit in found.hits):
        return found
    hits = {hit.record.record_id: hit for hit in found.hits}
    ranked = [Ranked(hit.record.record_id, hit.score, hit.record.contested)
              for hit in found.hits]
    missing = corrections_missing(ranked)
    try:
        # As of a moment, a correction is shown if it was in force then.
        records = {} if not missing else await (
            runtime.stores.records.records_by_id(scope.namespace, missing)
            if viewpoint.as_of is None else runtime.stores.records.records_as_of(
                scope.namespace, missing, viewpoint.as_of))
    except Exception:
        log.exception("reading the corrections of contested hits failed; answering the "
                      "hits as they are")
        records = {}
    for record_id, record in sorted(records.items()):
        if record.embedding is None or not scope.admits(record) or not confident_enough(
                record.confidence, record.tier, viewpoint.min_confidence,
                runtime.confidence_thresholds):
            continue
        place = hits[place_taken(ranked, record_id).record_id]
        hits[record_id] = Hit(record, Fused(record_id, place.score, None, None), place.score,
                              float(np.dot(record.embedding, found.vector)), place.relevance)
        ranked.append(Ranked(record_id, place.score, record.contested))
    order = settled(ranked)
    corrects = corrected(order)
    return replace(found, hits=[
        replace(hits[item.record_id], score=item.score,
                corrects=corrects.get(item.record_id, ()))
        for item in order][:scope.limit])



async def with_links(runtime: Runtime, found: Found, scope: SearchScope, hops: int,
                     viewpoint: Viewpoint) -> Found:
    """`found` with the records its best hits reach within `hops` along links and shared
    entities (the anchor pattern, processors/knowledge/graph.py), each scored below the hit it
    was reached from and kept only within `scope` and the viewpoint's confidence (a hit
    reached so scores the more of its own and that); the best `scope.limit` of all. A walk
    that fails leaves the hits as they are (fail open)."""
    if hops <= 0 or not found.hits:
        return found
    hits = {hit.record.record_id: hit for hit in found.hits}
    try:
        reached = await walk(runtime.stores.entities, scope.namespace,
                             [hit.record.record_id for hit in found.hits[:EXPANDED_FROM]],
                             hops, PersonalReader(scope.agent_id), viewpoint.as_of)
        wanted = {node: way for node, way in reached.reached.items()
                  if not is_entity(node) and node not in hits}
        records = await (runtime.stores.records.records_by_id(scope.namespace, list(wanted))
                         if viewpoint.as_of is None else runtime.stores.records.records_as_of(
                             scope.namespace, list(wanted), viewpoint.as_of))
    except Exception:
        log.exception("following the links of a recall failed; answering its hits alone")
        return found
    linked = []
    for record_id, record in sorted(records.items()):
        way = wanted[record_id]
        if record.embedding is None or not scope.admits(record) or not confident_enough(
                record.confidence, record.tier, viewpoint.min_confidence,
                runtime.confidence_thresholds):
            continue
        origin = hits[way.origin]
        score = reached_score(origin.score, way)
        linked.append(Hit(record, Fused(record_id, score, None, None), score,
                          float(np.dot(record.embedding, found.vector)),
                          reached_score(origin.relevance, way), via=way))
    # A hit that a better one links to scores as a record reached from it would, if that is
    # more: a link says it belongs with what was found best.
    kept = []
    for hit in found.hits:
        linked_by = reached.reached.get(hit.record.record_id)
        if linked_by is not None and linked_by.hops > 0:
            through = reached_score(hits[linked_by.origin].score, linked_by)
            if through > hit.score:
                hit = replace(hit, score=through, via=linked_by)
        kept.append(hit)
    ranked = sorted([*kept, *linked], key=lambda hit: (-hit.score, hit.record.record_id))
    return replace(found, hits=ranked[:scope.limit])



def best_left(fused: Sequence[Fused], blends: Mapping[str, Blend]) -> list[float]:
    """For each position of `fused`, the highest fused score times blend from there on (the
    blend 1 without scoring)."""
    reach = [0.0] * len(fused)
    highest = 0.0
    for position in range(len(fused) - 1, -1, -1):
        blend = blends.get(fused[position].record_id)
        highest = max(highest, fused[position].score * (1.0 if blend is None else blend.factor))
        reach[position] = highest
    return reach



async def blends_of(runtime: Runtime, scoring: Scoring | None, namespace: str,
                    record_ids: Sequence[str], now: datetime) -> dict[str, Blend]:
    """The blends of these records, or none without scoring. If the agent's use cannot be
    read, the records rank as if nobody had used them."""
    if scoring is None:
        return {}
    try:
        used = await runtime.stores.ratings.score_inputs(namespace, scoring.agent_id,
                                                         record_ids)
    except Exception as exc:
        log.warning("could not read the adaptive scores of %s; ranking without use: %s",
                    namespace, exc)
        used = {}
    return scoring.blends(used, record_ids, now)



async def ranked(index: SearchIndex, text: str, vector: Vector | None,
                 embedding: asyncio.Future[Vector] | None, scope: SearchScope,
                 weights: FusionWeights) -> tuple[list[Fused], QueryTerms]:
    """Both lists from `index`, fused, and the query's terms as the index counts them; the
    query's vector is given or being computed."""
    term_ids = query_term_ids(text)
    counts = await index.term_counts(scope.namespace, term_ids)
    if vector is None:
        assert embedding is not None
        vector = (await embedding)[0]
    dense, lexical = await asyncio.gather(
        index.search(vector, replace(scope, limit=max(DENSE_CANDIDATES, 3 * scope.limit),
                                     min_score=-1.0)),
        index.search_lexical(query_vector(term_ids, counts.frequencies, counts.documents),
                             replace(scope, limit=max(LEXICAL_CANDIDATES, 3 * scope.limit))))
    return (fuse([(hit.record_id, hit.score) for hit in dense],
                 [(hit.record_id, hit.score) for hit in lexical],
                 weights),
            QueryTerms(term_ids, counts))



@dataclass(frozen=True)
class Searched:
    """What a search found: a query's hits (`found`), or, for a search by related ids alone,
    the records that list them (`related`); and whether the namespace holds any record (a
    misspelled namespace holds none: said only when nothing was found)."""

    query: SearchQuery
    found: Found | None
    related: list[RelatedRecord]
    holds_records: bool

    @property
    def degraded(self) -> bool:
        return self.found is not None and self.found.degraded

    @property
    def record_ids(self) -> list[str]:
        """The records shown, in rank order."""
        if self.found is not None:
            return record_ids(self.found.hits)
        return [related.record.record_id for related in self.related]


async def search(runtime: Runtime, index: SearchIndex, fallback: RecordsSearch,
                 query: SearchQuery) -> Searched:
    """A hybrid search, or, without a query, a search by related ids."""
    if query.query:
        found = await recall(runtime, index, fallback, query)
        return Searched(query, found, [], bool(found.hits) or await holds_records(
            runtime, query.scope.namespace))
    related = [hit for hit in await runtime.stores.records.related_records(query.scope)
               if confident_enough(hit.record.confidence, hit.record.tier,
                                   query.viewpoint.min_confidence,
                                   runtime.confidence_thresholds)]
    return Searched(query, None, related, bool(related) or await holds_records(
        runtime, query.scope.namespace))


async def holds_records(runtime: Runtime, namespace: str) -> bool:
    """Whether an answer with nothing in it comes from a namespace that holds nothing (a
    misspelled name, most often): asked only then, so a search that finds pays nothing. If
    Postgres cannot say, the namespace is taken to hold records: no false alarm."""
    try:
        return await runtime.stores.records.holds_records(namespace)
    except Exception as exc:
        log.warning("could not tell whether namespace %s holds records: %s", namespace, exc)
        return True



def record_ids(hits: Sequence[Hit]) -> list[str]:
    return [hit.record.record_id for hit in hits]
