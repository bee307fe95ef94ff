"""The Faust app of each role: topics, agents as short pipelines over batches, timers and the
HTTP views.

- `ingest`: memory.events and runs.events, the consolidations to publish, search and the
  other read views. It owns the index.
- `consolidator`: memory.consolidate, in a process and consumer group of its own.

Both serve `/healthz` and `/metrics`.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import faust
from faust.web import Request, Response, View

from processors.access import Caller
from processors.tiers import TierRules
from schemas.topics import MEMORY_CONSOLIDATE, MEMORY_EVENTS, RUNS_EVENTS
from stores.vector_index import SearchIndex, VectorIndex
from streams.auth import granted_namespace, may_see, personal_reader, reader_of
from streams.browser import wire_browser
from streams.change_feed import wire_changes
from streams.config import Settings
from streams.consolidation_requests import ConsolidationTrigger, consolidation_counts
from streams.consolidator import Consolidator
from streams.context import ContextQuery, build_context
from streams.faust_credentials import broker_credentials
from streams.fix_pattern_search import FixPatternQuery, find_fix_patterns
from streams.graph_view import wire_graph
from streams.json_values import jsonable
from streams.key_views import wire_keys
from streams.memory_intake import MemoryWriter, WriterState
from streams.memory_lifecycle import LifecycleApplier
from streams.record_history import core_block, pending_diffs, record_diff, record_history
from streams.record_sink import RecordSink
from streams.report_relay import ReportRelay
from streams.retention import RetentionJob
from streams.retrieval_log import RetrievalLog
from streams.run_intake import RunLedger
from streams.runtime import Runtime
from streams.search import BadQuery, SearchQuery, bounded_limit, search, spend_search
from streams.twins import TwinFinder
from streams.wiring import Role, Wiring, every, no_record
from streams.write_views import wire_writes

log = logging.getLogger(__name__)

# Maintenance reports listed per request, by default and at most.
REPORTS_LIMIT = 20
MAX_REPORTS_LIMIT = 200
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
        # Topics are declared once in infra/kafka/topics.json and created before start.
        topic_disable_leader=True,
        topic_allow_declare=False,
        consumer_auto_offset_reset="earliest",
        broker_commit_interval=settings.commit_interval_s,
        broker_session_timeout=settings.session_timeout_s,
        broker_heartbeat_interval=settings.session_timeout_s / 3,
        producer_acks=-1,
    )


def wire_ingest(wiring: Wiring, runtime: Runtime, index: VectorIndex, fallback: SearchIndex,
                settings: Settings) -> None:
    """The ingest role: writes and runs in, consolidations published, the read views."""
    app = wiring.app
    versions, blocks = runtime.stores.versions, runtime.stores.blocks
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
    wiring.common(index)
    relay = ReportRelay(runtime, sink)

    # The reports wait in Postgres for the next tick.
    every(app, settings.relay_interval_s, "publish consolidations", relay.publish_pending)

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
    every(app, settings.retention_interval_s, "expire records", retention.expire_due)

    retrievals = RetrievalLog(runtime.stores.retrievals, runtime.metrics)
    app.timer(interval=settings.retrieval_log_interval_s)(retrievals.write_queued)

    def exhausted(route: str, namespace: str, run_id: str | None) -> dict[str, Any]:
        runtime.metrics.search_budget_exhausted.labels(route).inc()
        return {"namespace": namespace, "run_id": run_id, "budget_exhausted": True,
                "max_searches_per_run": settings.max_searches_per_run}

    @wiring.page("/v1/search")
    async def search_view(web: View, request: Request, caller: Caller) -> Response:
        namespace = granted_namespace(caller, request.query)
        query = SearchQuery.from_params(request.query, reader_of(caller, request.query))
        if not await spend_search(runtime, namespace, query.run_id,
                                  settings.max_searches_per_run):
            return web.json({**exhausted("/v1/search", namespace, query.run_id), "hits": []})
        answer = await search(runtime, index, fallback, query)
        retrievals.surfaced(namespace=namespace, query=query.query, route="/v1/search",
                            record_ids=[hit["record_id"] for hit in answer["hits"]],
                            agent_id=query.scope.agent_id, run_id=query.run_id)
        return web.json({**answer, "budget_exhausted": False})

    @wiring.page("/v1/context")
    async def context_view(web: View, request: Request, caller: Caller) -> Response:
        flags = settings.memory
        namespace = granted_namespace(caller, request.query)
        query = ContextQuery.from_params(request.query, flags, reader_of(caller, request.query))
        if not flags.enabled:
            return web.json({"namespace": namespace, "enabled": False, "sections": {},
                             "tokens": 0, "degraded": []})
        if not await spend_search(runtime, namespace, query.run_id,
                                  settings.max_searches_per_run):
            return web.json({**exhausted("/v1/context", namespace, query.run_id),
                             "sections": {}, "tokens": 0, "degraded": []})
        pack = await build_context(runtime, index, fallback, flags, query)
        retrievals.surfaced(namespace=namespace, query=query.query, route="/v1/context",
                            record_ids=[item["record_id"] for items in pack["sections"].values()
                                        for item in items],
                            agent_id=query.scope.agent_id, run_id=query.run_id)
        return web.json({**pack, "enabled": True, "budget_exhausted": False})

    @wiring.page("/v1/fix-patterns")
    async def fix_patterns_view(web: View, request: Request, caller: Caller) -> Response:
        granted_namespace(caller, request.query)
        query = FixPatternQuery.from_params(request.query)
        return web.json(await find_fix_patterns(runtime, index, fallback, query))

    @wiring.page("/v1/consolidation/counts")
    async def counts_view(web: View, request: Request, caller: Caller) -> Response:
        namespace = granted_namespace(caller, request.query)
        return web.json(jsonable(await consolidation_counts(runtime, namespace)))

    @wiring.page("/v1/consolidation/reports")
    async def reports_view(web: View, request: Request, caller: Caller) -> Response:
        namespace = granted_namespace(caller, request.query)
        limit = bounded_limit(request.query.get("limit", str(REPORTS_LIMIT)), MAX_REPORTS_LIMIT)
        reports = await runtime.stores.consolidations.reports(namespace, limit)
        return web.json({"namespace": namespace, "reports": jsonable(reports)})

    @wiring.page("/v1/records/{record_id}")
    async def record_view(web: View, request: Request, caller: Caller,
                          record_id: str) -> Response:
        namespace = granted_namespace(caller, request.query)
        lineage = await runtime.stores.records.record_lineage(namespace, record_id)
        if lineage is None or not caller.sees(lineage.record.scope, lineage.record.agent_id):
            return no_record(web, record_id, namespace)
        return web.json(jsonable(lineage))

    @wiring.page("/v1/records/{record_id}/history")
    async def history_view(web: View, request: Request, caller: Caller,
                           record_id: str) -> Response:
        namespace = granted_namespace(caller, request.query)
        history = await record_history(versions, namespace, record_id) \
            if await may_see(runtime.stores.records, caller, namespace, record_id) else None
        if history is None:
            return no_record(web, record_id, namespace)
        return web.json(history)

    @wiring.page("/v1/records/{record_id}/diff")
    async def diff_view(web: View, request: Request, caller: Caller,
                        record_id: str) -> Response:
        namespace = granted_namespace(caller, request.query)
        diff = await record_diff(versions, namespace, record_id, request.query) \
            if await may_see(runtime.stores.records, caller, namespace, record_id) else None
        if diff is None:
            return no_record(web, record_id, namespace)
        return web.json(jsonable(diff))

    edit_block = wire_writes(wiring, runtime)

    @wiring.page("/v1/blocks/{label}", methods=("GET", "POST"))
    async def block_view(web: View, request: Request, caller: Caller, label: str) -> Response:
        if request.method == "POST":
            return await edit_block(web, request, caller=caller, label=label)
        namespace = granted_namespace(caller, request.query)
        agent_id = reader_of(caller, request.query)
        if agent_id is None:
            raise BadQuery("agent_id is required (or a key bound to the agent)")
        shown = await core_block(blocks, namespace, agent_id, label, settings.block_max_chars)
        if shown is None:
            return web.json({"error": f"no block {label!r} for {agent_id!r} in {namespace!r}"},
                            status=404)
        return web.json(shown)

    @wiring.page("/v1/pending-diffs")
    async def pending_diffs_view(web: View, request: Request, caller: Caller) -> Response:
        namespace = granted_namespace(caller, request.query)
        return web.json(await pending_diffs(versions, blocks, namespace, request.query,
                                            personal_reader(caller, request.query)))

    @wiring.page("/v1/stats")
    async def stats_view(web: View, request: Request, caller: Caller) -> Response:
        namespace = granted_namespace(caller, request.query)
        return web.json({
            "namespace": namespace,
            "records": await runtime.stores.records.record_counts(namespace),
            "index_points": await index.count(namespace),
        })

    wire_keys(wiring, runtime.stores.keys)
    wire_changes(wiring, runtime)
    wire_browser(wiring)
    wire_graph(wiring, runtime.stores.records)


def wire_consolidator(wiring: Wiring, runtime: Runtime) -> None:
    """The consolidator role: one request at a time, so that a namespace is never
    consolidated twice at once."""
    wiring.agent(MEMORY_CONSOLIDATE, "consolidator", lambda: Consolidator(runtime), 1)
    wiring.common(None)
