"""The planning routes (docs/planning.md): a repository's Beads work items, read fresh from its
issues.jsonl with the write-backs not synced yet laid over them.

    GET  /v1/planning/items?namespace=&repo=             every item: status, priority,
                                                         readiness, open blockers
    GET  /v1/planning/items/{item_id}?namespace=&repo=   its planning context: the item, its
                                                         dependencies and blockers with their
                                                         state, its ready siblings
    POST /v1/planning/sync {namespace, repo}             publishes planning.sync_requested:
                                                         the worker writes the pending claims,
                                                         closes and follow-ups into the file

A repo no checkout is configured for (or planning off: MEMORY_PLANNING) answers 404. A file
missing or corrupt answers the items as memstream last read them (Postgres), with `degraded`
naming planning and why; an item then answers 404 unless it was read before.
"""

from __future__ import annotations

from collections.abc import Sequence

from faust.web import Request, Response, View

from memstream_client.answers.planning import (
    PlanningBlocker,
    PlanningContext,
    PlanningDependency,
    PlanningItem,
    PlanningItemDetail,
    PlanningItems,
    PlanningSyncAccepted,
)
from memstream_client.events import PlanningSyncRequested
from processors.api.access import Caller
from processors.api.openapi import payload_body
from processors.api.parameters import NAMESPACE, PLANNING_ITEM, REPO
from processors.events.intake import json_object
from processors.planning.beads import (
    Blocker,
    UnknownItem,
    WorkItem,
    listing,
    planning_context,
)
from stores.beads_repo import UnknownRepo
from streams.api.auth import granted_namespace
from streams.api.pages import Pages
from streams.api.params import Param, Params, required
from streams.api.publishing import (
    POST,
    EventGate,
    answering,
    envelope_of,
    payload_fields,
    permitted,
    producer_of,
)
from streams.plumbing.runtime import Runtime
from streams.reads.planning import planning_items

ITEMS_PARAMS: Params = {"namespace": Param(NAMESPACE), "repo": Param(REPO)}
ITEM_PARAMS: Params = {**ITEMS_PARAMS, "item_id": Param(PLANNING_ITEM)}


def wire_planning(pages: Pages, runtime: Runtime) -> None:
    gate = EventGate(runtime.producer, runtime.max_event_bytes)

    @pages.page("/v1/planning/items", params=ITEMS_PARAMS, answer=PlanningItems)
    async def items_view(web: View, request: Request,
                         caller: Caller) -> PlanningItems | Response:
        """A repository's work items, each with its readiness and open blockers."""
        namespace = granted_namespace(caller, request.query)
        repo = required(request.query, "repo", REPO)
        try:
            read, degraded = await planning_items(runtime, namespace, repo)
        except UnknownRepo as exc:
            return no_planning(web, exc)
        return PlanningItems(namespace=namespace, repo=repo, degraded=degraded_list(degraded),
                             degraded_why=degraded,
                             items=[item_row(item, ready, open_blockers)
                                    for item, ready, open_blockers in listing(read)])

    @pages.page("/v1/planning/items/{item_id}", params=ITEM_PARAMS, answer=PlanningContext)
    async def item_view(web: View, request: Request, caller: Caller,
                        item_id: str) -> PlanningContext | Response:
        """An item's planning context: dependencies, blockers, ready siblings."""
        namespace = granted_namespace(caller, request.query)
        repo = required(request.query, "repo", REPO)
        try:
            read, degraded = await planning_items(runtime, namespace, repo)
            context = planning_context(read, item_id)
        except UnknownRepo as exc:
            return no_planning(web, exc)
        except UnknownItem:
            return web.json({"error": f"no item {item_id!r} in the planning of {repo!r}"},
                            status=404)
        item = context.item
        open_blockers = [b for b in context.blockers if b.open]
        return PlanningContext(
            namespace=namespace, repo=repo, degraded=degraded_list(degraded),
            degraded_why=degraded,
            item=PlanningItemDetail(
                **item_row(item, context.ready, open_blockers).model_dump(),
                description=item.description, acceptance_criteria=item.acceptance_criteria,
                fields=dict(item.fields)),
            dependencies=[PlanningDependency(id=dep.depends_on_id, kind=dep.kind,
                                             status=None if other is None else other.status,
                                             title=None if other is None else other.title)
                          for dep, other in context.dependencies],
            blockers=[blocker_row(b.item_id, b.kind, b.item) for b in context.blockers],
            ready_siblings=[item_row(sibling, True, []) for sibling in
                            context.ready_siblings],
        )

    @pages.page("/v1/planning/sync", params={}, methods=POST, answer=PlanningSyncAccepted,
                body=payload_body(PlanningSyncRequested, filled={"requested_by"}))
    @answering
    async def sync_view(web: View, request: Request,
                        caller: Caller) -> PlanningSyncAccepted | Response:
        """Ask the worker to write the repo's pending claims, closes and follow-ups into its
        issues.jsonl (202: published, not written yet)."""
        body = json_object(await request.read(), runtime.max_event_bytes)
        permitted(caller, body, "write")
        payload = {**payload_fields(body), "requested_by": producer_of(caller)}
        raw, checked = gate.checked(envelope_of("planning.sync_requested", body, payload,
                                                caller),
                                    {"planning.sync_requested": PlanningSyncRequested})
        repo = checked.event.payload.repo
        if runtime.planning is None or repo not in runtime.planning.repos:
            return no_planning(web, UnknownRepo(repo, "no checkout is configured for it, or "
                                                      "planning is off"))
        published = await gate.publish(raw, checked.event)
        return PlanningSyncAccepted(repo=repo, event_id=published.event_id)


def degraded_list(why: str | None) -> list[str]:
    """What a read of the file names degraded: planning, when it was read as memstream last
    read it (`why`)."""
    return [] if why is None else ["planning"]


def no_planning(web: View, exc: UnknownRepo) -> Response:
    return web.json({"error": f"no planning for repo {exc.repo!r}: {exc.detail}"}, status=404)


def item_row(item: WorkItem, ready: bool, open_blockers: Sequence[Blocker]) -> PlanningItem:
    return PlanningItem(
        id=item.id, title=item.title, status=item.status, priority=item.priority,
        issue_type=item.issue_type, assignee=item.assignee, labels=list(item.labels),
        parent=item.parent, ready=ready, blockers=[b.item_id for b in open_blockers],
        close_reason=item.close_reason, created_at=item.fields.get("created_at"),
        updated_at=item.fields.get("updated_at"))


def blocker_row(item_id: str, kind: str, item: WorkItem | None) -> PlanningBlocker:
    return PlanningBlocker(id=item_id, kind=kind, status=None if item is None else item.status,
                           title=None if item is None else item.title,
                           open=item is not None and not item.closed)
