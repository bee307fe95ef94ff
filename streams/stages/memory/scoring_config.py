"""`memory.scoring` → the next version of the namespace's adaptive scoring config
(stores/recall/scoring_configs.py), which every worker's recalls use within seconds.

A change comes on `memory.events` with the memory changes, keyed by namespace, and is applied
in their order (streams/stages/memory/lifecycle.py), to the newest version, in one
transaction. A change made on another version than the newest is a `stale_version` dead
letter; one whose result the rules refuse (an unknown parameter, a value out of its range,
blend weights that do not sum to 1) an `invalid_event`, with every reason
(processors/recall/scoring_changes.py). A replay of an applied event adds no version: its event id
is in `scoring_config_versions`.
"""

from __future__ import annotations

from memstream_client.events import MemoryScoring
from stores.recall.scoring_configs import ScoringChange
from streams.plumbing.runtime import Runtime


class ScoringConfigApplier:
    def __init__(self, runtime: Runtime) -> None:
        self._configs = runtime.stores.scoring_configs

    async def apply_one(self, event: MemoryScoring) -> str:
        """`configured`, or `duplicate` for an event applied before; raises
        `RefusedScoringChange` for a change the rules refuse."""
        payload = event.payload
        applied = await self._configs.apply_change(ScoringChange(
            event.event_id, event.namespace, payload.changes, payload.changed_by,
            event.occurred_at, payload.expected_version))
        return "duplicate" if applied is None else "configured"
