"""The rules of a rating (`memory.rate`, seed 003's rate_memories): who may rate what (the
gap a rating names follows processors/recall/gaps.py).

An agent rates memories it was given, so it may rate only what it may read: a shared
memory, or one personal to itself. One memory it may not rate makes the whole event a dead
letter (`broken_reference`): a rating is one judgment of what a recall returned, and
applying part of it would leave the rest silently undone. The detail reads the same for a
memory that does not exist and for another agent's, so that neither the dead letter nor the
HTTP answer tells them apart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from processors.events.errors import Rejected


@dataclass(frozen=True)
class Owner:
    """What decides whether an agent may rate a record: its scope and its owner."""

    scope: str
    agent_id: str | None


def visible_to(rater: str, owner: Owner) -> bool:
    """Whether `rater` reads this record: shared ones and its own personal ones."""
    return owner.scope != "personal" or owner.agent_id == rater


def unrateable(rater: str, memory_ids: Sequence[str],
               found: Mapping[str, Owner]) -> list[str]:
    """The memories `rater` may not rate, in the order given: unknown (not in `found`) or
    another agent's personal memory."""
    return [memory_id for memory_id in memory_ids
            if memory_id not in found or not visible_to(rater, found[memory_id])]


def check_rateable(rater: str, namespace: str, memory_ids: Sequence[str],
                   found: Mapping[str, Owner]) -> None:
    """Reject (broken_reference) a rating that names a memory the rater may not rate."""
    missing = unrateable(rater, memory_ids, found)
    if missing:
        raise Rejected("broken_reference", not_rateable(rater, namespace, missing))


def not_rateable(rater: str, namespace: str, missing: Sequence[str]) -> str:
    return (f"no memory {', '.join(missing)} that agent {rater!r} may read in namespace "
            f"{namespace!r}")

