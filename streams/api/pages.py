"""How a view is served: given its caller's key (unless public), timed by route and status,
answered alike on errors, whichever module of the HTTP face it comes from, and its answer
rendered as the route declares it (memstream_client/answers/): a view returns the declared model, or
a response of its own (an error, raw content)."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import wraps
from typing import Any

import faust
from faust.web import Request, Response, View

from memstream_client.answers.base import Answer
from memstream_client.answers.writes import Waited, WriteOutcome
from processors.api.access import AccessDenied
from processors.api.openapi import Answered, Body, OneOf, Parameter, Raw, Route
from processors.events.errors import Refused, Rejected
from streams.api.auth import Authenticator
from streams.api.params import BadQuery, Params, check, path_names
from streams.plumbing.failures import classify
from streams.plumbing.metrics import Metrics

log = logging.getLogger(__name__)

ViewHandler = Callable[..., Awaitable[Response | Answer]]
Served = Callable[..., Awaitable[Response]]


def observed_view(declared: Route, handler: ViewHandler, metrics: Metrics,
                  authenticator: Authenticator | None, params: Params) -> Served:
    """The handler, given the request's `caller` unless the route is public (no
    `authenticator`), once its path segments and query parameters are those of `params`
    (streams/api/params.py), with a `BadQuery` answered as 400, an `AccessDenied` as 401 or
    403 and counted, a `Rejected` body as 400 with its dead-letter reason, data a store
    refuses as 400 with the store's reason, and its latency observed by route template and
    status code. An answer is rendered with the route's status of success; one that is not
    the model the route declares for the method is a fault of the view's (500)."""
    route = declared.path
    segments = path_names(route)

    @wraps(handler)
    async def observed(web: View, request: Request, **kwargs: Any) -> Response:
        started = time.perf_counter()
        status = 500
        try:
            try:
                if authenticator is not None:
                    kwargs["caller"] = await authenticator.caller(
                        request.headers.get("Authorization"))
                check(params, {name: kwargs[name] for name in segments}, request.query)
                response = rendered(web, declared, request.method,
                                    await handler(web, request, **kwargs))
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
            except Exception as exc:
                error = classify(exc)
                if not isinstance(error, Refused):
                    raise
                # What a view gives a store comes from the request: a value the rules of
                # streams/api/params.py let through, the request's fault, and a rule to add.
                log.warning("%s: a store refused the request's data: %s", route, error.detail,
                            exc_info=exc)
                response = web.json({"error": error.detail, "reason": error.reason},
                                    status=400)
            status = response.status
            return response
        finally:
            metrics.http_seconds.labels(route, str(status)).observe(
                time.perf_counter() - started)

    return observed


class Pages:
    """Serves the views of one app, each through `observed_view`, and keeps what each
    route declares, which the API's OpenAPI document describes (streams/api/openapi.py)."""

    def __init__(self, app: faust.App, metrics: Metrics, authenticator: Authenticator) -> None:
        self._app = app
        self._metrics = metrics
        self._authenticator = authenticator
        self._routes: list[Route] = []

    @property
    def routes(self) -> tuple[Route, ...]:
        """Every route served so far, as it was declared, in the order of registration."""
        return tuple(self._routes)

    def page(self, route: str, *, params: Params,
             answer: Answered | Mapping[str, Answered], public: bool = False,
             methods: Sequence[str] = ("GET",),
             body: Body | None = None) -> Callable[[ViewHandler], ViewHandler]:
        """Serve the decorated handler at `route` for `methods` (others answer 405), given
        the caller unless `public`, for requests whose path segments and query parameters
        are those of `params`, which names every segment of `route`. `answer` is what it
        answers on success (by method, when its methods answer differently; `OneOf` several
        models, when what is asked decides which). `body`
        describes the JSON body its POST takes (the view reads and checks it)."""
        unruled = [name for name in path_names(route) if name not in params]
        if unruled:
            raise ValueError(f"{route}: no rule for its path segments {unruled}")
        answers = dict(answer) if isinstance(answer, Mapping) else \
            dict.fromkeys(methods, answer)
        if set(answers) != set(methods):
            raise ValueError(f"{route}: answers declared for {sorted(answers)}, not for its "
                             f"methods {sorted(methods)}")

        def register(handler: ViewHandler) -> ViewHandler:
            declared = Route(
                route, tuple(methods),
                tuple(Parameter(name, param.rule.schema, param.repeats)
                      for name, param in params.items()),
                answers, body, summary=_summary(handler), public=public)
            observed = observed_view(declared, handler, self._metrics,
                                     None if public else self._authenticator, params)
            self._routes.append(declared)
            # Faust's own function views answer GET only.
            view = type(handler.__name__, (View,), {
                "__doc__": handler.__doc__, "__module__": handler.__module__,
                **{method.lower(): observed for method in methods}})
            self._app.page(route)(view)
            return handler

        return register


def rendered(web: View, route: Route, method: str, answer: Response | Answer) -> Response:
    """A view's answer as sent: a response as it is; a model as JSON with the route's status
    of success, once it is the model the route declares for the method."""
    if not isinstance(answer, Answer):
        return answer
    declared = route.answers[method]
    if isinstance(declared, Raw) or not isinstance(
            answer, declared.models if isinstance(declared, OneOf) else declared):
        raise TypeError(f"{method} {route.path} answered a {type(answer).__name__}; it "
                        f"declares {declared}")
    if route.waits(method) and isinstance(answer, Waited) and answer.decided:
        return web.bytes(answer.rendered(), content_type="application/json", status=200)
    # A write not decided yet says where its outcome will be read.
    headers = {"Location": answer.outcome_url} if isinstance(answer, WriteOutcome) else None
    return web.bytes(answer.rendered(), content_type="application/json",
                     status=route.success(method), headers=headers)


def _summary(handler: ViewHandler) -> str:
    """The first line of what the handler says of itself."""
    return (handler.__doc__ or "").strip().split("\n", 1)[0]


def no_record(web: View, record_id: str, namespace: str) -> Response:
    """The one answer for a record that does not exist and one the caller may not see."""
    return web.json({"error": f"no record {record_id!r} in {namespace!r}"}, status=404)
