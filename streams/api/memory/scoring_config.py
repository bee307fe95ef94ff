"""The adaptive scoring's config over HTTP (docs/http-api.md#scoring-config).

    GET /v1/memory-scoring/config?namespace=
    PUT /v1/memory-scoring/config          {namespace, changes: {parameter: number},
                                            expected_version?, event_id?}
    GET /v1/memory-scoring/config/history?namespace=[&limit=]

The GET answers the config in effect on the worker that answers (its recalls use it; every
worker reads a change within `stores.recall.scoring_configs.DEFAULT_MAX_AGE_S`), its version, who
changed it last and when, and each parameter with its default and range, for a form to show.
Any key that reads the namespace reads its config and history: the scoring shapes what every
reader gets, and tells nothing of any memory.

The PUT, for the namespace's admins, publishes a `memory.scoring` to `memory.events`, which
the worker applies (streams/stages/memory/scoring_config.py). Before publishing it checks the
change as the worker will, against the newest version: a change the rules refuse is answered
400 with every reason (`problems`) and the version it was checked against, and is never
published. The author is the key (`key:<key id>`).
"""

from __future__ import annotations

from dataclasses import asdict

from faust.web import Request, Response, View

from memstream_client.answers.scoring import (
    ScoringChangeAccepted,
    ScoringHistory,
    ScoringParameter,
    ScoringSettings,
    ScoringVersion,
)
from memstream_client.events import MemoryScoring
from processors.api.access import Caller
from processors.api.openapi import payload_body
from processors.api.parameters import integer
from processors.events.intake import json_object
from processors.recall.scoring_changes import (
    CONSTRAINTS,
    RefusedScoringChange,
    changed_config,
    parameters_view,
)
from stores.recall import scoring_configs
from streams.api.auth import granted_namespace
from streams.api.pages import Pages
from streams.api.params import NAMESPACE_PARAMS, Param, Params, value
from streams.api.publishing import (
    EventGate,
    actor_of,
    answering,
    envelope_of,
    payload_fields,
    permitted,
)
from streams.plumbing.runtime import Runtime

HISTORY_LIMIT = 20
MAX_HISTORY_LIMIT = 200
LIMIT = integer(1, MAX_HISTORY_LIMIT)
HISTORY_PARAMS: Params = {**NAMESPACE_PARAMS, "limit": Param(LIMIT)}


class ScoringConfigViews:
    def __init__(self, runtime: Runtime) -> None:
        self._configs = runtime.stores.scoring_configs
        self._max_event_bytes = runtime.max_event_bytes
        self._gate = EventGate(runtime.producer, runtime.max_event_bytes)

    async def config(self, web: View, request: Request,
                     caller: Caller) -> Response | ScoringSettings | ScoringChangeAccepted:
        """The adaptive scoring config in effect and its parameters; PUT changes it (admin)."""
        if request.method == "PUT":
            return await self._change(web, request, caller)
        namespace = granted_namespace(caller, request.query)
        current = await self._configs.current(namespace)
        return ScoringSettings(
            namespace=namespace, version=current.version, changed_by=current.changed_by,
            changed_at=current.changed_at, config=asdict(current.config),
            parameters=[ScoringParameter.model_validate(parameter)
                        for parameter in parameters_view(current.config)],
            constraints=list(CONSTRAINTS))

    async def _change(self, web: View, request: Request,
                      caller: Caller) -> Response | ScoringChangeAccepted:
        body = json_object(await request.read(), self._max_event_bytes)
        permitted(caller, body, "admin")
        payload = {**payload_fields(body), "changed_by": actor_of(caller)}
        raw, checked = self._gate.checked(envelope_of("memory.scoring", body, payload, caller),
                                          {"memory.scoring": MemoryScoring})
        event = checked.event
        newest = await self._configs.newest(event.namespace)
        try:
            changed_config(newest.version, newest.config, event.payload.changes,
                           event.payload.expected_version)
        except RefusedScoringChange as refused:
            return web.json({"error": refused.detail, "reason": refused.reason,
                             "problems": list(refused.problems), "version": newest.version},
                            status=400)
        published = await self._gate.publish(raw, event)
        return ScoringChangeAccepted(namespace=event.namespace, event_id=published.event_id,
                                     checked_on_version=newest.version)

    async def history(self, web: View, request: Request, caller: Caller) -> ScoringHistory:
        """The versions of the adaptive scoring config, newest first: what each changed,
        who, when."""
        namespace = granted_namespace(caller, request.query)
        limit = value(request.query, "limit", LIMIT, HISTORY_LIMIT)
        versions = await self._configs.history(namespace, limit)
        return ScoringHistory(namespace=namespace,
                              versions=[version_view(version) for version in versions])


def version_view(version: scoring_configs.ScoringVersion) -> ScoringVersion:
    return ScoringVersion(version=version.version, changes=version.changes,
                          changed_by=version.changed_by, changed_at=version.changed_at,
                          event_id=version.event_id, config=asdict(version.config))


def wire_scoring_config(pages: Pages, runtime: Runtime) -> None:
    views = ScoringConfigViews(runtime)
    pages.page("/v1/memory-scoring/config", params=NAMESPACE_PARAMS, methods=("GET", "PUT"),
               answer={"GET": ScoringSettings, "PUT": ScoringChangeAccepted},
               body=payload_body(MemoryScoring, filled={"changed_by"}))(
        answering(views.config))
    pages.page("/v1/memory-scoring/config/history", params=HISTORY_PARAMS,
               answer=ScoringHistory)(views.history)
