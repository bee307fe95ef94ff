"""The Faust app of each role: topics, agents as short pipelines over batches, timers and the
HTTP views.

- `ingest`: memory.events, runs.events, sessions.events and planning.events, the
  consolidations to publish, search and the other read views. It owns the index, and keeps
  the dead letters of every topic readable.
- `consolidator`: memory.consolidate, in a process and consumer group of its own.

Both serve `/healthz` and `/metrics`.
"""

from __future__ import annotations

import logging
import time
from functools import partial
from pathlib import Path

import faust

from processors.memory.tiers import TierRules
from schemas.topics import (
    DEAD_LETTER_TOPICS,
    DOCUMENTS_EVENTS,
    MEMORY_CONSOLIDATE,
    MEMORY_EVENTS,
    PLANNING_EVENTS,
    RUNS_EVENTS,
    SESSIONS_EVENTS,
    source_of_dead_letters,
)
from stores.index.postgres_search import RecordsSearch
from stores.index.protocol import VectorIndex
from streams.api.browser import wire_browser
from streams.api.memory.changes import wire_changes
from streams.api.memory.documents import wire_documents
from streams.api.memory.ratings import wire_ratings
from streams.api.memory.records import wire_records
from streams.api.memory.review_queue import wire_review_queue
from streams.api.memory.scoring_config import wire_scoring_config
from streams.api.memory.sessions import wire_sessions
from streams.api.memory.writes import wire_writes
from streams.api.openapi import wire_openapi
from streams.api.operations.consolidation import wire_consolidation
from streams.api.operations.dead_letters import wire_dead_letters
from streams.api.operations.keys import wire_keys
from streams.api.operations.planning import wire_planning
from streams.api.operations.runs import wire_runs
from streams.api.recall.context import wire_context
from streams.api.recall.fix_patterns import wire_fix_patterns
from streams.api.recall.gaps import wire_gaps
from streams.api.recall.graph import wire_graph
from streams.api.recall.search import wire_search
from streams.api.recall.summary import wire_summary
from streams.plumbing.config import Settings
from streams.plumbing.faust_credentials import broker_credentials
from streams.plumbing.runtime import Runtime
from streams.reads.gap_keeper import GapKeeper
from streams.reads.recalls import Recalls
from streams.reads.retrieval_log import RetrievalLog
from streams.stages.consolidation.consolidator import Consolidator
from streams.stages.consolidation.report_relay import ReportRelay
from streams.stages.consolidation.requests import ConsolidationTrigger
from streams.stages.dead_letter_log import DeadLetterLog, leave_on_topic
from streams.stages.knowledge.entity_enrichment import EntityEnricher
from streams.stages.knowledge.entity_index import EntityIndexer
from streams.stages.knowledge.stale_facts import StaleFactFinder
from streams.stages.memory.document_intake import DocumentIntake
from streams.stages.memory.intake import MemoryWriter, WriterState
from streams.stages.memory.lifecycle import LifecycleApplier
from streams.stages.memory.session_ledger import SessionLedger
from streams.stages.memory.twins import TwinFinder
from streams.stages.record_sink import RecordSink
from streams.stages.retention import RetentionJob
from streams.stages.runs.intake import RunLedger
from streams.stages.runs.planning_ledger import PlanningLedger, request_syncs
from streams.wiring import Role, Wiring

log = logging.getLogger(__name__)

# How often the ingest worker checks whether its index wants maintenance.
INDEX_MAINTENANCE_INTERVAL_S = 30.0


def faust_dir(settings: Settings, role: Role) -> Path:
    return settings.data_dir / "faust" / group_id(settings.app_id, role)


def group_id(app_id: str, role: Role) -> str:
    """The consumer group of a role: the app id, and a group of its own for consolidation."""
    return app_id if role == "ingest" else f"{app_id}-consolidator"


def create_app(settings: Settings, role: Role) -> faust.App:
    return faust.App(
        group_id(settings.app_id, role),
        broker=f"kafka://{settings.kafka_bootstrap}",
        broker_credentials=broker_credentials(settings.kafka_security),
        store="memory://",
        autodiscover=False,
        datadir=str(faust_dir(settings, role)),
        web_host=settings.web_host,
        web_port=settings.web_port,
        # Faust's own routes serve tables, which these apps have none of, and would answer
        # without a key: every route is ours (streams/api/).
        web_router_enabled=False,
        web_tables_enabled=False,
        # Topics are declared once in infra/kafka/topics.json and created before start.
        topic_disable_leader=True,
        topic_allow_declare=False,
        consumer_auto_offset_reset="earliest",
        broker_commit_interval=settings.commit_interval_s,
        broker_session_timeout=settings.session_timeout_s,
        broker_heartbeat_interval=settings.session_timeout_s / 3,
        producer_acks=-1,
    )


def wire_ingest(wiring: Wiring, runtime: Runtime, index: VectorIndex, fallback: RecordsSearch,
                settings: Settings) -> None:
    """The ingest role: writes and runs in, consolidations published, the read views."""
    app = wiring.app
    sink = RecordSink(runtime, index)
    trigger = ConsolidationTrigger(runtime)
    # What the writer remembers between batches outlives a crash of its stages.
    writer_state = WriterState()
    lifecycle = LifecycleApplier(runtime, sink, settings.protect,
                                 TierRules(settings.promote_after_updates),
                                 settings.block_max_chars)
    twins = None if settings.twin_cosine is None else \
        TwinFinder(runtime, index, settings.twin_cosine)
    wiring.agent(MEMORY_EVENTS, "memory-writes",
                 lambda: MemoryWriter(runtime, sink, trigger, writer_state, lifecycle,
                                      refuse_low_value=settings.refuse_low_value, twins=twins),
                 settings.batch_max)
    wiring.agent(RUNS_EVENTS, "run-ledger", lambda: RunLedger(runtime, sink),
                 settings.batch_max)
    wiring.agent(SESSIONS_EVENTS, "session-ledger", lambda: SessionLedger(runtime),
                 settings.batch_max)
    wiring.agent(DOCUMENTS_EVENTS, "document-intake", lambda: DocumentIntake(runtime, sink),
                 settings.batch_max)
    wiring.agent(PLANNING_EVENTS, "planning-ledger", lambda: PlanningLedger(runtime),
                 settings.batch_max)
    for dlq in DEAD_LETTER_TOPICS:
        wiring.agent(dlq, f"dead-letters-{source_of_dead_letters(dlq)}",
                     partial(DeadLetterLog, runtime, dlq), settings.batch_max,
                     leave_on_topic(runtime))
    wiring.common(index)
    relay = ReportRelay(runtime, sink)

    # The reports wait in Postgres for the next tick.
    wiring.every(settings.relay_interval_s, "publish consolidations", relay.publish_pending)

    async def maintain_index() -> None:
        # Optimizing blocks the worker for seconds: only while it has nothing to consume.
        if not wiring.health.idle():
            return
        started = time.perf_counter()
        if await index.maintain(settings.index_optimize_after):
            log.info("index optimized in %.1fs", time.perf_counter() - started)

    app.timer(interval=INDEX_MAINTENANCE_INTERVAL_S)(maintain_index)

    # What is due is still due at the next tick.
    retention = RetentionJob(runtime, sink, settings.retention)
    wiring.every(settings.retention_interval_s, "expire records", retention.expire_due)

    retrievals = RetrievalLog(runtime.stores.retrievals, runtime.stores.gaps, runtime.metrics)
    app.timer(interval=settings.retrieval_log_interval_s)(retrievals.write_queued)
    gap_keeper = GapKeeper(runtime, index, fallback)
    wiring.every(settings.gap_interval_s, "keep the gaps", gap_keeper.keep)
    if settings.planning_sync_s is not None:
        wiring.every(settings.planning_sync_s, "sync planning",
                     partial(request_syncs, runtime))
    if settings.invalidation:
        stale_facts = StaleFactFinder(runtime, index, lifecycle)
        wiring.every(settings.stale_check_interval_s, "find stale facts",
                     stale_facts.check_some)
    entity_index = EntityIndexer(runtime)
    wiring.every(settings.entity_index_interval_s, "index entities", entity_index.catch_up)
    if runtime.llm is not None:
        enricher = EntityEnricher(runtime, runtime.llm)
        wiring.every(settings.entity_llm_interval_s, "ask the LLM hook for entities",
                     enricher.read_some)

    pages = wiring.pages
    recalls = Recalls(runtime, index, fallback, retrievals, settings.memory,
                      settings.max_searches_per_run)
    wire_search(pages, recalls)
    wire_context(pages, recalls)
    wire_summary(pages, recalls)
    wire_fix_patterns(pages, runtime, index, fallback)
    wire_consolidation(pages, runtime)
    edit_block = wire_writes(pages, runtime)
    wire_records(pages, runtime, index, settings.block_max_chars, edit_block)
    wire_review_queue(pages, runtime)
    wire_keys(pages, runtime.stores.keys)
    wire_changes(pages, runtime)
    wire_runs(pages, runtime)
    wire_sessions(pages, runtime, recalls)
    wire_ratings(pages, runtime)
    wire_scoring_config(pages, runtime)
    wire_gaps(pages, runtime.stores.gaps)
    wire_documents(pages, runtime)
    wire_planning(pages, runtime)
    wire_browser(pages)
    wire_graph(pages, runtime.stores.records, runtime.stores.entities)
    wire_dead_letters(pages, runtime.stores.dead_letters)
    wire_openapi(pages)


def wire_consolidator(wiring: Wiring, runtime: Runtime) -> None:
    """The consolidator role: one request at a time, so that a namespace is never
    consolidated twice at once."""
    wiring.agent(MEMORY_CONSOLIDATE, "consolidator", lambda: Consolidator(runtime), 1)
    wiring.common(None)
