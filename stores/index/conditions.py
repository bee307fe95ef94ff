"""What a search may return, as conditions on a point's payload (stores/index/payload.py): the
one description of a search scope that both Qdrant backends translate into their client's
filter, each in one function (stores/index/qdrant_edge.py, qdrant_server.py). The pgvector
backend keeps the same payload fields as columns and reads the scope into its query's
parameters (stores/index/pgvector.py)."""

from __future__ import annotations

from dataclasses import dataclass

from stores.index.protocol import SearchScope, Visibility


@dataclass(frozen=True)
class OneOf:
    """The field holds one of `values`; on an array field, one of its elements is."""

    field: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Within:
    """The field's number lies within the bounds given."""

    field: str
    gt: float | None = None
    gte: float | None = None
    lte: float | None = None


@dataclass(frozen=True)
class AnyOf:
    """At least one of the conditions holds."""

    conditions: tuple[Condition, ...]


@dataclass(frozen=True)
class NoneOf:
    """None of the conditions holds."""

    conditions: tuple[Condition, ...]


Condition = OneOf | Within | AnyOf | NoneOf


def in_namespace(namespace: str) -> list[Condition]:
    """Every point of a namespace, whatever it holds (counts, listings, neighbours)."""
    return [OneOf("namespace", (namespace,))]


def scope_conditions(scope: SearchScope, now: float) -> list[Condition]:
    """What a search of `scope` may return at `now` (epoch seconds): its namespace, the
    records visible to its agent and not expired, and the optional filters."""
    conditions = in_namespace(scope.namespace)
    conditions += [OneOf(name, tuple(values)) for name, values in (
        ("record_kind", scope.record_kinds), ("related_ids", scope.related_ids)) if values]
    conditions += [OneOf("readers", tuple(Visibility(scope.agent_id, now).readers)),
                   Within("live_until", gt=now)]
    conditions += [OneOf(name, tuple(values)) for name, values in (
        ("tags", scope.tags), ("tier", scope.tiers), ("review_state", scope.review_states),
        ("repo", scope.repo_keys), ("security_scope", scope.security_scopes)) if values]
    if scope.memory_types:
        # Memory types narrow memories only: digests and fix patterns have none.
        conditions.append(AnyOf((OneOf("memory_type", tuple(scope.memory_types)),
                                 NoneOf((OneOf("record_kind", ("memory",)),)))))
    if scope.since is not None or scope.until is not None:
        conditions.append(Within("created_at", gte=scope.since, lte=scope.until))
    return conditions
