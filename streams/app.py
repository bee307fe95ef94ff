"""The Faust app: topics, agents as short pipelines over batches, and the HTTP views."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import wraps
from pathlib import Path
from typing import Any

import faust
from aiokafka import TopicPartition
from aiokafka.errors import KafkaError
from faust.web import Request, Response, View
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from streams.batches import inbound, run_in_stages
from streams.config import Settings
from streams.consolidation_requests import consolidation_counts
from streams.consolidator import Consolidator
from streams.consumer_lag import ConsumerLagProbe
from streams.fix_pattern_search import FixPatternQuery, find_fix_patterns
from streams.json_values import jsonable
from streams.memory_intake import MemoryWriter
from streams.messages import Outbound
from streams.metrics import INPUT_TOPICS, Metrics
from streams.run_intake import RunLedger
from streams.runtime import Runtime
from streams.search import BadQuery, SearchQuery, required, search

log = logging.getLogger(__name__)

ViewHandler = Callable[..., Awaitable[Response]]
# Maintenance reports listed per request, by default and at most.
REPORTS_LIMIT = 20
MAX_REPORTS_LIMIT = 200


def faust_dir(settings: Settings) -> Path:
    return settings.data_dir / "faust" / settings.app_id


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


def create_app(settings: Settings) -> faust.App:
    return faust.App(
        settings.app_id,
        broker=f"kafka://{settings.kafka_bootstrap}",
        store="memory://",
        autodiscover=False,
        datadir=str(faust_dir(settings)),
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


class FaustProducer:
    """Produces raw bytes through the app's producer and waits for every acknowledgement."""

    def __init__(self, app: faust.App) -> None:
        self._app = app

    async def produce(self, messages: Sequence[Outbound]) -> None:
        if not messages:
            return
        producer = await self._app.maybe_start_producer()
        pending = [
            await producer.send(m.topic, m.key, m.value, None, None, list(m.headers))
            for m in messages
        ]
        await asyncio.gather(*pending)


def wire(app: faust.App, settings: Settings, runtime: Runtime,
         lag_probe: ConsumerLagProbe) -> None:
    """Attach the agents, the timers and the web views to `app`."""

    def page(route: str) -> Callable[[ViewHandler], ViewHandler]:
        """Serve the decorated handler at `route` (see `observed_view`)."""

        def register(handler: ViewHandler) -> ViewHandler:
            app.page(route)(observed_view(route, handler, runtime.metrics))
            return handler

        return register

    async def measure_consumer_lag() -> None:
        assigned = [TopicPartition(tp.topic, tp.partition) for tp in app.consumer.assignment()
                    if tp.topic in INPUT_TOPICS]
        try:
            await lag_probe.measure(assigned)
        except KafkaError as exc:
            # A metric must not take the worker down; the next tick tries again.
            log.warning("could not measure consumer lag: %s", exc)

    app.timer(interval=settings.lag_interval_s)(measure_consumer_lag)

    def raw_topic(name: str) -> faust.TopicT:
        return app.topic(name, key_type=bytes, value_type=bytes, value_serializer="raw",
                         key_serializer="raw")

    @app.agent(raw_topic("memory.events"), name="memory-writes")
    async def memory_writes(stream: faust.StreamT[bytes]) -> None:
        await run_in_stages(stream, MemoryWriter(runtime), batch_max=settings.batch_max,
                            within_s=settings.batch_within_s)

    consolidator = Consolidator(runtime)

    @app.agent(raw_topic("memory.consolidate"), name="consolidator")
    async def consolidate(stream: faust.StreamT[bytes]) -> None:
        # One request at a time: a namespace is never consolidated twice at once.
        async for event in stream.events():
            await consolidator.consolidate_message(inbound(event))

    @app.agent(raw_topic("runs.events"), name="run-ledger")
    async def run_ledger(stream: faust.StreamT[bytes]) -> None:
        await run_in_stages(stream, RunLedger(runtime), batch_max=settings.batch_max,
                            within_s=settings.batch_within_s)

    @page("/v1/search")
    async def search_view(web: View, request: Request) -> Response:
        query_params: Any = request.query
        query = SearchQuery.from_params(query_params, query_params.getall("kind", []))
        return web.json(await search(runtime, query))

    @page("/v1/fix-patterns")
    async def fix_patterns_view(web: View, request: Request) -> Response:
        query = FixPatternQuery.from_params(request.query)
        return web.json(await find_fix_patterns(runtime, query))

    @page("/v1/consolidation/counts")
    async def counts_view(web: View, request: Request) -> Response:
        namespace = required(request.query, "namespace")
        return web.json(jsonable(await consolidation_counts(runtime, namespace)))

    @page("/v1/consolidation/reports")
    async def reports_view(web: View, request: Request) -> Response:
        namespace = required(request.query, "namespace")
        try:
            limit = int(request.query.get("limit", str(REPORTS_LIMIT)))
        except ValueError:
            limit = 0
        if not 1 <= limit <= MAX_REPORTS_LIMIT:
            raise BadQuery(f"limit must be an integer between 1 and {MAX_REPORTS_LIMIT}")
        reports = await runtime.repository.maintenance_reports(namespace, limit)
        return web.json({"namespace": namespace, "reports": [jsonable(r) for r in reports]})

    @page("/v1/records/{record_id}")
    async def record_view(web: View, request: Request, record_id: str) -> Response:
        namespace = required(request.query, "namespace")
        lineage = await runtime.repository.record_lineage(namespace, record_id)
        if lineage is None:
            return web.json({"error": f"no record {record_id!r} in {namespace!r}"}, status=404)
        return web.json(jsonable(lineage))

    @page("/v1/stats")
    async def stats_view(web: View, request: Request) -> Response:
        namespace = required(request.query, "namespace")
        return web.json({
            "namespace": namespace,
            "records": await runtime.repository.record_counts(namespace),
            "index_points": await runtime.index.count(namespace),
        })

    @page("/healthz")
    async def health_view(web: View, request: Request) -> Response:
        checks: dict[str, str] = {}
        try:
            await runtime.repository.ping()
            checks["postgres"] = "ok"
        except Exception as exc:
            checks["postgres"] = f"down: {exc}"
        try:
            await runtime.index.count()
            checks["index"] = "ok"
        except Exception as exc:
            checks["index"] = f"down: {exc}"
        healthy = checks["postgres"] == "ok"
        # The index is rebuildable and searches fall back to Postgres: degraded, not down.
        status = "ok" if healthy and checks["index"] == "ok" else "degraded" if healthy else "down"
        return web.json({"status": status, **checks}, status=200 if healthy else 503)

    @page("/metrics")
    async def metrics_view(web: View, request: Request) -> Response:
        # aiohttp refuses a charset inside content_type; the exposition format is UTF-8.
        return web.bytes(
            generate_latest(runtime.metrics.registry),
            content_type=CONTENT_TYPE_LATEST.split(";")[0] + "; version=0.0.4",
        )

