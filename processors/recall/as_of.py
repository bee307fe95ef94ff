"""Memory as it stood at a moment: which version of a record was current then, and whether
the record was in force.

Every change of a record is a version with the time it was made (`changed_at`: when memory
learned it). As of a moment, a record is the latest of its versions made at or before that
moment; it did not exist yet if it has none, and it was out of force if that version took it
out: merged into another record (`superseded`), past its retention (`expired`), or restated
by a newer memory with another value (`invalidated`). A later restore brings it back from the
restore on. Deprecation is a review state, which reads filter like any other.

Two clocks, kept apart: `recorded_at` (when memory learned a fact: its first version) and
`valid_from`/`valid_until` (when the fact held: from the event that stated it to the event
that stated another value). `as_of` follows the first, so that it answers "what would a recall
have shown then"; both are shown with every record.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from processors.memory.lifecycle import RecordVersion

Standing = Literal["not_recorded", "in_force", "superseded", "expired", "invalidated"]
# The changes after which a record is out of force until it is restored, each the standing
# it leaves the record in.
_OUT_OF_FORCE: dict[str, Standing] = {
    "superseded": "superseded", "expired": "expired", "invalidated": "invalidated"}
LEAVING_CHANGES = frozenset(_OUT_OF_FORCE)


def version_at(versions: Sequence[RecordVersion], moment: datetime) -> RecordVersion | None:
    """The version current at `moment`: the highest-numbered one made at or before it.
    Versions are numbered in the order they were made, so the number decides between two
    made in one transaction (which share their time)."""
    made = [version for version in versions if version.changed_at <= moment]
    return max(made, key=lambda version: version.version) if made else None


def standing_at(versions: Sequence[RecordVersion], moment: datetime) -> Standing:
    """Whether a record was in force at `moment`, and if not, why."""
    current = version_at(versions, moment)
    if current is None:
        return "not_recorded"
    return _OUT_OF_FORCE.get(current.change, "in_force")


def in_force_at(versions: Sequence[RecordVersion], moment: datetime) -> RecordVersion | None:
    """The version current at `moment` if the record was in force then, else None."""
    current = version_at(versions, moment)
    return current if current is not None and current.change not in LEAVING_CHANGES else None
