"""How a view is served: given its caller's key (unless public), timed by route and status,
and answered alike on errors, whichever module of the HTTP face it comes from."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from functools import wraps
from typing import Any

import faust
from faust.web import Request, Response, View

from processors.access import AccessDenied
from processors.errors import Rejected
from streams.api.auth import Authenticator
from streams.api.params import BadQuery
from streams.plumbing.metrics import Metrics

ViewHandler = Callable[..., Awaitable[Response]]


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


class Pages:
    """Serves the views of one app, each through `observed_view`."""

    def __init__(self, app: faust.App, metrics: Metrics, authenticator: Authenticator) -> None:
        self._app = app
        self._metrics = metrics
        self._authenticator = authenticator

    def page(self, route: str, *, public: bool = False,
             methods: Sequence[str] = ("GET",)) -> Callable[[ViewHandler], ViewHandler]:
        """Serve the decorated handler at `route` for `methods` (others answer 405), given
        the caller unless `public`."""

        def register(handler: ViewHandler) -> ViewHandler:
            observed = observed_view(route, handler, self._metrics,
                                     None if public else self._authenticator)
            # Faust's own function views answer GET only.
            view = type(handler.__name__, (View,), {
                "__doc__": handler.__doc__, "__module__": handler.__module__,
                **{method.lower(): observed for method in methods}})
            self._app.page(route)(view)
            return handler

        return register


def no_record(web: View, record_id: str, namespace: str) -> Response:
    """The one answer for a record that does not exist and one the caller may not see."""
    return web.json({"error": f"no record {record_id!r} in {namespace!r}"}, status=404)
