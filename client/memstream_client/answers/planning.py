"""Planning: a repository's Beads work items and an item's planning context."""

from __future__ import annotations

from typing import Any

from memstream_client.answers.base import Answer


class PlanningItem(Answer):
    """A Beads work item of a repository's planning (docs/planning.md)."""

    id: str
    title: str
    status: str
    priority: int
    issue_type: str
    assignee: str | None
    labels: list[str]
    parent: str | None
    # Open, and nothing it waits for still open.
    ready: bool
    # The ids of its blockers still open.
    blockers: list[str]
    close_reason: str | None
    created_at: str | None
    updated_at: str | None


class PlanningItems(Answer):
    namespace: str
    repo: str
    # ["planning"] when the file could not be read: the items as memstream last read them.
    degraded: list[str]
    degraded_why: str | None
    items: list[PlanningItem]


class PlanningBlocker(Answer):
    id: str
    kind: str
    # None for an item the file does not hold (another repository's).
    status: str | None
    title: str | None
    open: bool


class PlanningDependency(Answer):
    id: str
    kind: str
    status: str | None
    title: str | None


class PlanningItemDetail(PlanningItem):
    description: str
    acceptance_criteria: str
    # Every field as Beads wrote it.
    fields: dict[str, Any]


class PlanningContext(Answer):
    """An item's planning context: the item, its dependencies, blockers, ready siblings."""

    namespace: str
    repo: str
    degraded: list[str]
    degraded_why: str | None
    item: PlanningItemDetail
    dependencies: list[PlanningDependency]
    blockers: list[PlanningBlocker]
    ready_siblings: list[PlanningItem]


class PlanningSyncAccepted(Answer):
    repo: str
    event_id: str
