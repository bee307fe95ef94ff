"""`GET /healthz` and `GET /metrics`, public on every role: whether this worker can serve
(Postgres, the index, crashed agents, stalled partitions) and its Prometheus metrics."""

from __future__ import annotations

from typing import Any

from faust.web import Request, Response, View
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from stores.index.protocol import VectorIndex
from streams.api.pages import Pages
from streams.api.params import NO_PARAMS
from streams.plumbing.health import Health
from streams.plumbing.runtime import Runtime


def wire_status(pages: Pages, runtime: Runtime, health: Health, index: VectorIndex | None,
                role: str) -> None:
    @pages.page("/healthz", public=True, params=NO_PARAMS)
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
        return web.json({"status": status, "role": role, **checks, **problems},
                        status=200 if healthy else 503)

    @pages.page("/metrics", public=True, params=NO_PARAMS)
    async def metrics_view(web: View, request: Request) -> Response:
        # aiohttp refuses a charset inside content_type; the exposition format is UTF-8.
        return web.bytes(
            generate_latest(runtime.metrics.registry),
            content_type=CONTENT_TYPE_LATEST.split(";")[0] + "; version=0.0.4",
        )
