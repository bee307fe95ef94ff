"""How a role's app is wired: its staged agents, its timers and its HTTP views, each view
authenticated (unless public), timed and answered alike on errors."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import wraps
from typing import Any, Literal

import faust
from aiokafka import TopicPartition
from aiokafka.errors import KafkaError
from faust.web import Request, Response, View
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from processors.access import AccessDenied
from processors.errors import Rejected, Unexpected
from schemas.topics import MEMORY_CONSOLIDATE, MEMORY_EVENTS, RUNS_EVENTS
from stores.vector_index import VectorIndex
from streams.auth import Authenticator
from streams.batches import BatchStages, StagedAgent
from streams.config import Settings
from streams.consumer_lag import ConsumerLagProbe
from streams.dead_letters import send_dead_letters
from streams.health import Health
from streams.messages import InboundMessage
from streams.metrics import Metrics
from streams.runtime import Runtime
from streams.search import BadQuery

log = logging.getLogger(__name__)

Role = Literal["ingest", "consolidator"]
ViewHandler = Callable[..., Awaitable[Response]]
# The methods a view is routed for; its handler tells them apart.
# The topics each role consumes.
ROLE_TOPICS: dict[Role, tuple[str, ...]] = {
    "ingest": (MEMORY_EVENTS, RUNS_EVENTS),
    "consolidator": (MEMORY_CONSOLIDATE,),
}


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


def observed_view(route: str, handler: ViewHandler, metrics: Metrics,
                  authenticator: Authenticator | None) -> ViewHandler:
    """The handler, given the request's `caller` unless the route is public (no
    `authenticator`), with a `BadQuery` answered as 400, an `AccessDenied` as 401 or 403 and
    counted, a `Rejected` body as 400 with its dead-letter reason, and its latency observed
    by route template and status code."""

    @wraps(handler)
    async def observed(web: View, request: Request, **kwargs: Any) -> Response:
        started = time.perf_counter()
        status = 500
        try:
            try:
                if authenticator is not None:
                    kwargs["caller"] = await authenticator.caller(
                        request.headers.get("Authorization"))
                response = await handler(web, request, **kwargs)
            except BadQuery as exc:
                response = web.json({"error": str(exc)}, status=400)
            except Rejected as exc:
                # A body the intake would dead-letter: the reason its dead letter would carry.
                response = web.json({"error": exc.detail, "reason": exc.reason}, status=400)
            except AccessDenied as exc:
                metrics.auth_failures.labels(exc.failure).inc()
                response = web.json({"error": str(exc)}, status=exc.status, headers=(
                    {"WWW-Authenticate": 'Bearer realm="memstream"'} if exc.status == 401
                    else None))
            status = response.status
            return response
        finally:
            metrics.http_seconds.labels(route, str(status)).observe(
                time.perf_counter() - started)

    return observed


class Wiring:
    """Attaches agents, timers and views to one role's app."""

    def __init__(self, app: faust.App, settings: Settings, runtime: Runtime, health: Health,
                 lag_probe: ConsumerLagProbe, role: Role) -> None:
        self.app = app
        self._authenticator = Authenticator(runtime.stores.keys, enabled=settings.auth)
        self._settings = settings
        self._runtime = runtime
        self.health = health
        self._lag_probe = lag_probe
        self._role = role

    def page(self, route: str, *, public: bool = False,
             methods: Sequence[str] = ("GET",)) -> Callable[[ViewHandler], ViewHandler]:
        """Serve the decorated handler at `route` for `methods` (others answer 405), given
        the caller unless `public` (see `observed_view`)."""

        def register(handler: ViewHandler) -> ViewHandler:
            observed = observed_view(route, handler, self._runtime.metrics,
                                     None if public else self._authenticator)
            # Faust's own function views answer GET only.
            view = type(handler.__name__, (View,), {
                "__doc__": handler.__doc__, "__module__": handler.__module__,
                **{method.lower(): observed for method in methods}})
            self.app.page(route)(view)
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

        @self.page("/healthz", public=True)
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

        @self.page("/metrics", public=True)
        async def metrics_view(web: View, request: Request) -> Response:
            # aiohttp refuses a charset inside content_type; the exposition format is UTF-8.
            return web.bytes(
                generate_latest(runtime.metrics.registry),
                content_type=CONTENT_TYPE_LATEST.split(";")[0] + "; version=0.0.4",
            )


def no_record(web: View, record_id: str, namespace: str) -> Response:
    """The one answer for a record that does not exist and one the caller may not see."""
    return web.json({"error": f"no record {record_id!r} in {namespace!r}"}, status=404)
