"""`GET /healthz` and `GET /metrics`, public on every role: whether this worker can serve
(Postgres, the index, crashed agents, stalled partitions) and its Prometheus metrics."""

from __future__ import annotations

from faust.web import Request, Response, View
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from memstream_client.answers import status as answers
from processors.api.openapi import Raw
from stores.index.protocol import VectorIndex
from streams.api.pages import Pages
from streams.api.params import NO_PARAMS
from streams.plumbing.health import Health
from streams.plumbing.runtime import Runtime


def wire_status(pages: Pages, runtime: Runtime, health: Health, index: VectorIndex | None,
                role: str) -> None:
    @pages.page("/healthz", public=True, params=NO_PARAMS, answer=answers.Health)
    async def health_view(web: View, request: Request) -> answers.Health | Response:
        """Whether this worker can serve: 200, or 503 with the same answer."""
        try:
            await runtime.stores.ping()
            postgres = "ok"
        except Exception as exc:
            postgres = f"down: {exc}"
        indexed: dict[str, str] = {}
        if index is not None:
            try:
                await index.count()
                indexed["index"] = "ok"
            except Exception as exc:
                indexed["index"] = f"down: {exc}"
        problems = health.problems()
        healthy = postgres == "ok" and not problems
        # The index is rebuildable and searches fall back to Postgres: degraded, not down.
        status = ("down" if postgres != "ok" else "stalled" if problems
                  else "degraded" if indexed.get("index", "ok") != "ok" else "ok")
        # A role without an index says nothing of one; a worker without problems lists none.
        answer = answers.Health.model_validate(
            {"status": status, "role": role, "postgres": postgres, **indexed, **problems})
        if healthy:
            return answer
        return web.bytes(answer.rendered(), content_type="application/json", status=503)

    @pages.page("/metrics", public=True, params=NO_PARAMS, answer=Raw(("text/plain",)))
    async def metrics_view(web: View, request: Request) -> Response:
        """The worker's Prometheus metrics, in the text exposition format."""
        # aiohttp refuses a charset inside content_type; the exposition format is UTF-8.
        return web.bytes(
            generate_latest(runtime.metrics.registry),
            content_type=CONTENT_TYPE_LATEST.split(";")[0] + "; version=0.0.4",
        )
