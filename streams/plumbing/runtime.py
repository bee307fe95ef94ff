"""The worker's long-lived resources, shared by its agents, views and timers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from typing import Protocol

import numpy as np

from embedder.model import Embedder
from embedder.models import TextRole
from processors.consolidation.candidates import ConsolidationSettings
from processors.consolidation.plan import DerivedReview
from processors.consolidation.trigger import TriggerRules
from processors.recall.confidence import DEFAULT_TIER_THRESHOLDS
from processors.runs.fix_patterns import DEFAULT_FIX_WINDOW
from processors.runs.learnings import LearningThresholds
from processors.text.calibration import Calibration, calibration_of
from processors.text.embedding import Vector
from stores.api_keys import ApiKeys
from stores.beads_repo import BeadsRepos
from stores.consolidations import Consolidations
from stores.core_blocks import CoreBlocks
from stores.dead_letters import DeadLetters
from stores.documents import Documents
from stores.entities import Entities
from stores.fix_patterns import FixPatterns
from stores.planning import Planning
from stores.recall.gaps import Gaps
from stores.recall.ratings import Ratings
from stores.recall.retrievals import Retrievals
from stores.recall.scoring_configs import ScoringConfigs
from stores.record_versions import RecordVersions
from stores.records import Records
from stores.runs import Runs
from stores.sessions import Sessions
from stores.similarity_vectors import SimilarityVectors, text_digest
from stores.write_outcomes import WriteOutcomes
from streams.plumbing.failures import Attempts, RetryPolicy
from streams.plumbing.llm_hook import ChatEndpoint
from streams.plumbing.messages import Outbound
from streams.plumbing.metrics import Metrics


class Producer(Protocol):
    async def produce(self, messages: Sequence[Outbound]) -> None:
        """Send all messages and return once the broker has acknowledged every one."""


class AnnouncementLog(Protocol):
    async def event_ids_since(self, since_epoch_s: float) -> set[str]:
        """The event ids of the announcements on memory.updated produced since then."""


class Stores(Protocol):
    """The stores the stages use, each by its contract (stores.postgres.stores opens them on
    one pool; the unit tests, in memory)."""

    @property
    def records(self) -> Records: ...

    @property
    def runs(self) -> Runs: ...

    @property
    def fix_patterns(self) -> FixPatterns: ...

    @property
    def consolidations(self) -> Consolidations: ...

    @property
    def retrievals(self) -> Retrievals: ...

    @property
    def versions(self) -> RecordVersions: ...

    @property
    def blocks(self) -> CoreBlocks: ...

    @property
    def keys(self) -> ApiKeys: ...

    @property
    def dead_letters(self) -> DeadLetters: ...

    @property
    def sessions(self) -> Sessions: ...

    @property
    def documents(self) -> Documents: ...

    @property
    def ratings(self) -> Ratings: ...

    @property
    def gaps(self) -> Gaps: ...

    @property
    def scoring_configs(self) -> ScoringConfigs: ...

    @property
    def planning(self) -> Planning: ...

    @property
    def entities(self) -> Entities: ...

    @property
    def writes(self) -> WriteOutcomes: ...

    @property
    def similarity_vectors(self) -> SimilarityVectors: ...

    async def ping(self) -> None: ...

    async def close(self) -> None: ...


@dataclass(frozen=True)
class Runtime:
    stores: Stores
    embedder: Embedder
    metrics: Metrics
    producer: Producer
    announcements: AnnouncementLog
    max_event_bytes: int
    fix_window: timedelta = DEFAULT_FIX_WINDOW
    # How much evidence a run learning needs before it is proposed as a draft memory.
    learnings: LearningThresholds = field(default_factory=LearningThresholds)
    # The optional LLM hook; None keeps every text deterministic.
    llm: ChatEndpoint | None = None
    trigger_rules: TriggerRules = field(default_factory=TriggerRules)
    consolidation: ConsolidationSettings = field(default_factory=ConsolidationSettings)
    retry_policy: RetryPolicy = field(default_factory=RetryPolicy)
    # How consolidation stores its merges (MEMSTREAM_DERIVED_REVIEW).
    derived_review: DerivedReview = "draft"
    # The repositories' planning files (MEMORY_PLANNING=beads); None: planning is off.
    planning: BeadsRepos | None = None
    # The confidence each tier's records need to be shown (processors/recall/confidence.py).
    confidence_thresholds: Mapping[str, float] = field(
        default_factory=lambda: dict(DEFAULT_TIER_THRESHOLDS))
    # The similarity model (embedder.models.SIMILARITY_MODEL), which judges whether two texts
    # say the same thing; None for a runtime whose stages never judge (some tests').
    judge: Embedder | None = None

    @property
    def calibration(self) -> Calibration:
        """The cosine thresholds of the embedder's model (processors/text/calibration.py)."""
        return calibration_of(self.embedder.spec.name)

    def attempts(self, topic: str) -> Attempts:
        """The retry policy for the steps of a stage that consumes `topic`."""
        return Attempts(topic, self.metrics, self.retry_policy)

    async def embed(self, texts: Sequence[str], *, role: TextRole) -> Vector:
        """texts' vectors: what is stored ("passage") or what is searched with ("query")."""
        return await embed_with(self.embedder, self.metrics, texts, role)

    async def judge_embed(self, texts: Sequence[str], *, role: TextRole) -> Vector:
        """texts' vectors of the similarity model, computed now."""
        if self.judge is None:
            raise RuntimeError("this runtime has no similarity model (Runtime.judge)")
        return await embed_with(self.judge, self.metrics, texts, role)

    async def similarity_vectors(self, texts: Sequence[str]) -> Vector:
        """Stored texts' vectors of the similarity model: those embedded before read back,
        the others embedded now and kept (stores/similarity_vectors.py)."""
        if self.judge is None:
            raise RuntimeError("this runtime has no similarity model (Runtime.judge)")
        return await cached_similarity_vectors(
            self.stores.similarity_vectors, self.judge, self.metrics, texts)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        yield
        self.metrics.stage_seconds.labels(name).observe(time.perf_counter() - started)


async def embed_with(embedder: Embedder, metrics: Metrics | None, texts: Sequence[str],
                     role: TextRole) -> Vector:
    """texts' vectors of that embedder, off the event loop; timed when `metrics` is given."""
    if not texts:
        return np.zeros((0, embedder.dimension), dtype=np.float32)
    started = time.perf_counter()
    # onnxruntime releases the GIL, so the event loop keeps serving while it computes.
    vectors = await asyncio.to_thread(partial(embedder.embed, role=role), list(texts))
    if metrics is not None:
        metrics.embed_seconds.observe(time.perf_counter() - started)
        metrics.embed_batch_size.observe(len(texts))
    return vectors


async def cached_similarity_vectors(cache: SimilarityVectors, judge: Embedder,
                                    metrics: Metrics | None, texts: Sequence[str]) -> Vector:
    """Stored texts' vectors of the similarity model `judge`, read from `cache` where it holds
    them, embedded and kept there where it does not."""
    if not texts:
        return np.zeros((0, judge.dimension), dtype=np.float32)
    model = judge.spec.name
    digests = [text_digest(text) for text in texts]
    known = dict(await cache.vectors(model, sorted(set(digests))))
    missing = {digest: text for digest, text in zip(digests, texts, strict=True)
               if digest not in known}
    if missing:
        fresh = await embed_with(judge, metrics, list(missing.values()), "passage")
        made = list(zip(missing, fresh, strict=True))
        await cache.store(model, made)
        known.update(made)
    return np.stack([known[digest] for digest in digests]).astype(np.float32)
