"""The stores a worker's stages use, opened on one pool: a process holds one pool for all of
them, not one each."""

from __future__ import annotations

import asyncpg

from processors.consolidation.trigger import TriggerRules
from stores.api_keys import PostgresApiKeys
from stores.consolidations import PostgresConsolidations
from stores.core_blocks import PostgresCoreBlocks
from stores.dead_letters import PostgresDeadLetters
from stores.documents import PostgresDocuments
from stores.embedding_model import PostgresEmbeddingModels
from stores.entities import PostgresEntities
from stores.fix_patterns import PostgresFixPatterns
from stores.planning import PostgresPlanning
from stores.postgres.rows import create_pool
from stores.recall.gaps import PostgresGaps
from stores.recall.ratings import PostgresRatings
from stores.recall.retrievals import PostgresRetrievals
from stores.recall.scoring_configs import PostgresScoringConfigs
from stores.record_versions import PostgresRecordVersions
from stores.records import PostgresRecords
from stores.runs import PostgresRuns
from stores.sessions import PostgresSessions
from stores.similarity_vectors import PostgresSimilarityVectors
from stores.write_outcomes import PostgresWriteOutcomes

_SEED_RULES = TriggerRules()


class PostgresStores:
    def __init__(self, pool: asyncpg.Pool, rules: TriggerRules = _SEED_RULES) -> None:
        """`rules` say which windows new memories are counted in, and how long they are
        kept."""
        self._pool = pool
        self.embedding_model = PostgresEmbeddingModels(pool)
        self.records = PostgresRecords(pool, count_window=rules.window,
                                       keep_windows_for=rules.keep_windows_for)
        self.runs = PostgresRuns(pool)
        self.fix_patterns = PostgresFixPatterns(pool)
        self.consolidations = PostgresConsolidations(pool,
                                                     keep_windows_for=rules.keep_windows_for)
        self.retrievals = PostgresRetrievals(pool)
        self.versions = PostgresRecordVersions(pool)
        self.blocks = PostgresCoreBlocks(pool)
        self.keys = PostgresApiKeys(pool)
        self.dead_letters = PostgresDeadLetters(pool)
        self.sessions = PostgresSessions(pool)
        self.documents = PostgresDocuments(pool)
        self.ratings = PostgresRatings(pool)
        self.gaps = PostgresGaps(pool)
        self.scoring_configs = PostgresScoringConfigs(pool)
        self.planning = PostgresPlanning(pool)
        self.entities = PostgresEntities(pool)
        self.writes = PostgresWriteOutcomes(pool)
        self.similarity_vectors = PostgresSimilarityVectors(pool)

    @classmethod
    async def connect(cls, dsn: str, rules: TriggerRules = _SEED_RULES) -> PostgresStores:
        return cls(await create_pool(dsn), rules)

    async def ping(self) -> None:
        await self._pool.fetchval("SELECT 1")

    async def close(self) -> None:
        await self._pool.close()
