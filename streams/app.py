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
from collections.abc import Awaitable, Callable, Sequence
from functools import wraps
from pathlib import Path
from typing import Any, Literal

import faust
from aiokafka import TopicPartition
from aiokafka.errors import KafkaError
from faust.web import Request, Response, View
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from processors.errors import Unexpected
from processors.tiers import TierRules
from schemas.topics import MEMORY_CONSOLIDATE, MEMORY_EVENTS, RUNS_EVENTS
from stores.vector_index import SearchIndex, VectorIndex
from streams.batches import BatchStages, StagedAgent
from streams.config import Settings
from streams.consolidation_requests import ConsolidationTrigger, consolidation_counts
from streams.consolidator import Consolidator
from streams.consumer_lag import ConsumerLagProbe
from streams.context import ContextQuery, build_context
from streams.dead_letters import send_dead_letters
from streams.faust_credentials import broker_credentials
from streams.fix_pattern_search import FixPatternQuery, find_fix_patterns
from streams.health import Health
from streams.json_values import jsonable
from streams.memory_intake import MemoryWriter, WriterState
from streams.memory_lifecycle import LifecycleApplier
from streams.messages import InboundMessage
from streams.metrics import Metrics
from streams.record_history import core_block, pending_diffs, record_diff, record_history
from streams.record_sink import RecordSink
from streams.report_relay import ReportRelay
from streams.retention import RetentionJob
from streams.retrieval_log import RetrievalLog
from streams.run_intake import RunLedger
from streams.runtime import Runtime
from streams.search import BadQuery, SearchQuery, required, search, spend_search
from streams.twins import TwinFinder

log = logging.getLogger(__name__)

Role = Literal["ingest", "consolidator"]
ViewHandler = Callable[..., Awaitable[Response]]
# Maintenance reports listed per request, by default and at most.
REPORTS_LIMIT = 20
MAX_REPORTS_LIMIT = 200
# How often the ingest worker checks whether its index wants maintenance.
INDEX_MAINTENANCE_INTERVAL_S = 30.0
# The topics each role consumes.
ROLE_TOPICS: dict[Role, tuple[str, ...]] = {
    "ingest": (MEMORY_EVENTS, RUNS_EVENTS),
    "consolidator": (MEMORY_CONSOLIDATE,),
}


def faust_dir(settings: Settings, role: Role) -> Path:
    return settings.data_dir / "faust" / group_id(settings.app_id, role)


def group_id(app_id: str, role: Role) -> str:
    """The consumer group of a role: the app id, and a group of its own for consolidation."""
    return app_id if role == "ingest" else f"{app_id}-consolidator"


def no_record(web: View, record_id: str, namespace: str) -> Response:
    return web.json({"error": f"no record {record_id!r} in {namespace!r}"}, status=404)


def every(app: faust.App, interval_s: float, what: str,
          job: Callable[[], Awaitable[object]]) -> None:
    """Run `job` on a timer that survives its failures: a timer that raised would never run
    again, so a failure is logged and the next tick tries again."""

    async def tick() -> None:
        try:
            await job()
        except Exception as exc:
            log.warning("could not %s: %s", what, Unexpected.of(exc).detail)

    # Faust names a timer after its function, in its logs and its task list.
    tick.__name__ = f"every_{what.replace(' ', '_')}"
    app.timer(interval=interval_s)(tick)


def observed_view(route: str, handler: ViewHandler, metrics: Metrics) -> ViewHandler:
    """The handler, with a `BadQuery` answered as 400 and its latency observed by route
    template and status code."""

    @wraps(handler)
    async def observed(web: View, request: Request, **kwargs: Any) -> Response:
        started = time.perf_counter()
        status = 500
        try:
            try:
                response = await handler(web, request, **kwargs)
            except BadQuery as exc:
                response = web.json({"error": str(exc)}, status=400)
            status = response.status
            return response
        finally:
            metrics.http_seconds.labels(route, str(status)).observe(
                time.perf_counter() - started)

    return observed


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


class Wiring:
    """Attaches agents, timers and views to one role's app."""

    def __init__(self, app: faust.App, settings: Settings, runtime: Runtime, health: Health,
                 lag_probe: ConsumerLagProbe, role: Role) -> None:
        self.app = app
        self._settings = settings
        self._runtime = runtime
        self.health = health
        self._lag_probe = lag_probe
        self._role = role

    def page(self, route: str) -> Callable[[ViewHandler], ViewHandler]:
        """Serve the decorated handler at `route` (see `observed_view`)."""

        def register(handler: ViewHandler) -> ViewHandler:
            self.app.page(route)(observed_view(route, handler, self._runtime.metrics))
            return handler

        return register

    def agent(self, topic: str, name: str, new_stages: Callable[[], BatchStages[Any]],
              batch_max: int) -> None:
        """A staged agent on `topic` (streams/batches.py): crashes restart it, events that
        crash every try are dead-lettered."""
        runtime = self._runtime

        async def give_up(messages: Sequence[InboundMessage], error: Unexpected) -> None:
            await send_dead_letters(runtime, [(message, error.rejection)
                                              for message in messages])

        staged = StagedAgent(name, new_stages, give_up, self.health, batch_max,
                             self._settings.batch_within_s, runtime.retry_policy)
        topic_of_bytes = self.app.topic(topic, key_type=bytes, value_type=bytes,
                                         value_serializer="raw", key_serializer="raw")
        self.app.agent(topic_of_bytes, name=name)(staged.run)

    def common(self, index: VectorIndex | None) -> None:
        """What every role has: the lag and stall probe, /healthz and /metrics."""
        app, runtime, health = self.app, self._runtime, self.health
        consumed = ROLE_TOPICS[self._role]

        async def measure_consumer_lag() -> None:
            assigned = [TopicPartition(tp.topic, tp.partition)
                        for tp in app.consumer.assignment() if tp.topic in consumed]
            try:
                health.observe_partitions(await self._lag_probe.measure(assigned))
            except KafkaError as exc:
                # A metric must not take the worker down; the next tick tries again.
                log.warning("could not measure consumer lag: %s", exc)

        app.timer(interval=self._settings.lag_interval_s)(measure_consumer_lag)

        @self.page("/healthz")
        async def health_view(web: View, request: Request) -> Response:
            checks: dict[str, Any] = {}
            try:
                await runtime.stores.ping()
                checks["postgres"] = "ok"
            except Exception as exc:
                checks["postgres"] = f"down: {exc}"
            if index is not None:
                try:
                    await index.count()
                    checks["index"] = "ok"
                except Exception as exc:
                    checks["index"] = f"down: {exc}"
            problems = health.problems()
            healthy = checks["postgres"] == "ok" and not problems
            # The index is rebuildable and searches fall back to Postgres: degraded, not down.
            status = ("down" if checks["postgres"] != "ok" else "stalled" if problems
                      else "degraded" if checks.get("index", "ok") != "ok" else "ok")
            return web.json({"status": status, "role": self._role, **checks, **problems},
                            status=200 if healthy else 503)

        @self.page("/metrics")
        async def metrics_view(web: View, request: Request) -> Response:
            # aiohttp refuses a charset inside content_type; the exposition format is UTF-8.
            return web.bytes(
                generate_latest(runtime.metrics.registry),
                content_type=CONTENT_TYPE_LATEST.split(";")[0] + "; version=0.0.4",
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
    async def search_view(web: View, request: Request) -> Response:
        query = SearchQuery.from_params(request.query)
        namespace = query.scope.namespace
        if not await spend_search(runtime, namespace, query.run_id,
                                  settings.max_searches_per_run):
            return web.json({**exhausted("/v1/search", namespace, query.run_id), "hits": []})
        answer = await search(runtime, index, fallback, query)
        retrievals.surfaced(namespace=namespace, query=query.query, route="/v1/search",
                            record_ids=[hit["record_id"] for hit in answer["hits"]],
                            agent_id=query.scope.agent_id, run_id=query.run_id)
        return web.json({**answer, "budget_exhausted": False})

    @wiring.page("/v1/context")
    async def context_view(web: View, request: Request) -> Response:
        flags = settings.memory
        query = ContextQuery.from_params(request.query, flags)
        namespace = query.scope.namespace
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
    async def fix_patterns_view(web: View, request: Request) -> Response:
        query = FixPatternQuery.from_params(request.query)
        return web.json(await find_fix_patterns(runtime, index, fallback, query))

    @wiring.page("/v1/consolidation/counts")
    async def counts_view(web: View, request: Request) -> Response:
        namespace = required(request.query, "namespace")
        return web.json(jsonable(await consolidation_counts(runtime, namespace)))

    @wiring.page("/v1/consolidation/reports")
    async def reports_view(web: View, request: Request) -> Response:
        namespace = required(request.query, "namespace")
        try:
            limit = int(request.query.get("limit", str(REPORTS_LIMIT)))
        except ValueError:
            limit = 0
        if not 1 <= limit <= MAX_REPORTS_LIMIT:
            raise BadQuery(f"limit must be an integer between 1 and {MAX_REPORTS_LIMIT}")
        reports = await runtime.stores.consolidations.reports(namespace, limit)
        return web.json({"namespace": namespace, "reports": jsonable(reports)})

    @wiring.page("/v1/records/{record_id}")
    async def record_view(web: View, request: Request, record_id: str) -> Response:
        namespace = required(request.query, "namespace")
        lineage = await runtime.stores.records.record_lineage(namespace, record_id)
        if lineage is None:
            return no_record(web, record_id, namespace)
        return web.json(jsonable(lineage))

    @wiring.page("/v1/records/{record_id}/history")
    async def history_view(web: View, request: Request, record_id: str) -> Response:
        namespace = required(request.query, "namespace")
        history = await record_history(versions, namespace, record_id)
        if history is None:
            return no_record(web, record_id, namespace)
        return web.json(history)

    @wiring.page("/v1/records/{record_id}/diff")
    async def diff_view(web: View, request: Request, record_id: str) -> Response:
        namespace = required(request.query, "namespace")
        diff = await record_diff(versions, namespace, record_id, request.query)
        if diff is None:
            return no_record(web, record_id, namespace)
        return web.json(jsonable(diff))

    @wiring.page("/v1/blocks/{label}")
    async def block_view(web: View, request: Request, label: str) -> Response:
        namespace = required(request.query, "namespace")
        agent_id = required(request.query, "agent_id")
        shown = await core_block(blocks, namespace, agent_id, label, settings.block_max_chars)
        if shown is None:
            return web.json({"error": f"no block {label!r} for {agent_id!r} in {namespace!r}"},
                            status=404)
        return web.json(shown)

    @wiring.page("/v1/pending-diffs")
    async def pending_diffs_view(web: View, request: Request) -> Response:
        namespace = required(request.query, "namespace")
        return web.json(await pending_diffs(versions, blocks, namespace, request.query))

    @wiring.page("/v1/stats")
    async def stats_view(web: View, request: Request) -> Response:
        namespace = required(request.query, "namespace")
        return web.json({
            "namespace": namespace,
            "records": await runtime.stores.records.record_counts(namespace),
            "index_points": await index.count(namespace),
        })


def wire_consolidator(wiring: Wiring, runtime: Runtime) -> None:
    """The consolidator role: one request at a time, so that a namespace is never
    consolidated twice at once."""
    wiring.agent(MEMORY_CONSOLIDATE, "consolidator", lambda: Consolidator(runtime), 1)
    wiring.common(None)
