"""A search scope as the conditions both Qdrant backends translate (stores/index/conditions.py):
its namespace, what its agent may see and what has not expired, and each filter given."""

from __future__ import annotations

from stores.index.conditions import AnyOf, NoneOf, OneOf, Within, in_namespace, scope_conditions
from stores.index.payload import readers_of
from stores.index.protocol import SearchScope

NOW = 1_800_000_000.0


def test_a_bare_scope_is_its_namespace_what_is_visible_and_unexpired_and_approved() -> None:
    assert scope_conditions(SearchScope("team-a", 5, 0.5), NOW) == [
        OneOf("namespace", ("team-a",)),
        OneOf("readers", (readers_of("shared", None),)),
        Within("live_until", gt=NOW),
        OneOf("review_state", ("approved",))]


def test_an_agent_sees_its_own_personal_points_beside_the_shared_ones() -> None:
    (readers,) = [c for c in scope_conditions(SearchScope("team-a", 5, 0.5, agent_id="ann"),
                                              NOW) if isinstance(c, OneOf)
                  and c.field == "readers"]
    assert readers.values == (readers_of("shared", None), readers_of("personal", "ann"))


def test_each_filter_is_a_condition_and_memory_types_narrow_memories_only() -> None:
    scope = SearchScope("team-a", 5, 0.5, record_kinds=("memory", "run_digest"),
                        related_ids=("mem_1",), tags=("ops",), tiers=("long_term",),
                        memory_types=("lesson",), since=10.0, until=20.0)
    conditions = scope_conditions(scope, NOW)
    assert OneOf("record_kind", ("memory", "run_digest")) in conditions
    assert OneOf("related_ids", ("mem_1",)) in conditions
    assert OneOf("tags", ("ops",)) in conditions
    assert OneOf("tier", ("long_term",)) in conditions
    assert OneOf("review_state", ("approved",)) in conditions
    assert AnyOf((OneOf("memory_type", ("lesson",)),
                  NoneOf((OneOf("record_kind", ("memory",)),)))) in conditions
    assert Within("created_at", gte=10.0, lte=20.0) in conditions


def test_a_namespace_alone_is_one_condition() -> None:
    assert in_namespace("team-a") == [OneOf("namespace", ("team-a",))]
