"""What became of a write, by its event id: read from what the stages keep of every outcome
already (the record a write stored, the lifecycle event that restated, changed or proposed,
the refused write, the dead letter, the core block's version or diff), so that an outcome is
kept exactly as long as the event's record of idempotency is, with no table of its own.
`WriteOutcomes` is the contract the read core uses; `PostgresWriteOutcomes` keeps it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol, cast

import asyncpg

from memstream_client.ids import memory_record_id

# What a write became: a new record; a version of the live memory it restates; a lifecycle
# change of the record it names (`proposed`: a pending diff waits for review; `unchanged`: it
# changed nothing); refused as not worth keeping; dead-lettered; or not decided yet.
Outcome = Literal["stored", "restated", "updated", "deprecated", "restored", "approved",
                  "rejected", "proposed", "promoted", "invalidated", "unchanged", "refused",
                  "dead_lettered", "pending"]


@dataclass(frozen=True)
class WriteOutcome:
    """A decided outcome: the record it made or changed (and that record's scope and owner,
    which decide who may read it) or the core block, the version it made, the pending diff
    it became, why it was refused or dead-lettered (the reason, and a dead letter's error),
    and when."""

    namespace: str
    event_id: str
    outcome: Outcome
    decided_at: datetime
    record_id: str | None = None
    version: int | None = None
    diff_id: str | None = None
    reason: str | None = None
    detail: str | None = None
    scope: str | None = None
    agent_id: str | None = None
    block_label: str | None = None


class WriteOutcomes(Protocol):
    async def outcome(self, namespace: str, event_id: str) -> WriteOutcome | None:
        """What the write `event_id` of `namespace` became; None while nothing is decided
        (or no such write reached the worker)."""


# One row at most from each place an outcome is kept, the most telling first: a lifecycle
# event says what the write did to the record it names (a write folded into its twin is a
# lifecycle event of type memory.write); a record made by the write; a refusal; a dead letter;
# a core block's version or its pending diff. A change is decided once it is announced on
# memory.updated, which the record sink does after the index has it: a write answered
# `stored` is searchable (a change that changed nothing is announced by no one).
_OUTCOME = """
SELECT * FROM (
    SELECT 1 AS rank, CASE WHEN l.type = 'memory.write' THEN 'restated' ELSE l.outcome END
               AS outcome,
           l.record_id, l.version,
           CASE WHEN l.outcome = 'proposed' THEN l.event_id END AS diff_id, NULL AS reason,
           NULL AS detail, r.scope, r.agent_id, NULL AS block_label,
           coalesce(l.announced_at, l.applied_at) AS decided_at
      FROM lifecycle_events l JOIN records r ON r.record_id = l.record_id
     WHERE l.event_id = $2 AND l.namespace = $1
       AND (l.announced_at IS NOT NULL OR l.outcome = 'unchanged')
    UNION ALL
    SELECT 2, 'stored', r.record_id, 1, NULL, NULL, NULL, r.scope, r.agent_id, NULL,
           r.announced_at
      FROM records r
     WHERE r.record_id = $3 AND r.namespace = $1 AND r.announced_at IS NOT NULL
    UNION ALL
    SELECT 3, 'refused', w.record_id, NULL, NULL, w.reason, NULL,
           CASE WHEN w.personal_agent IS NULL THEN 'shared' ELSE 'personal' END,
           w.personal_agent, NULL, w.announced_at
      FROM refused_writes w
     WHERE w.record_id = $3 AND w.namespace = $1 AND w.announced_at IS NOT NULL
    UNION ALL
    SELECT 4, 'dead_lettered', NULL, NULL, NULL, d.reason, d.error,
           CASE WHEN d.personal_agent IS NULL THEN 'shared' ELSE 'personal' END,
           d.personal_agent, NULL, d.dead_lettered_at
      FROM dead_letters d WHERE d.namespace = $1 AND d.event_id = $2
    UNION ALL
    SELECT 5, 'updated', NULL, v.version, NULL, NULL, NULL, 'personal', v.agent_id, v.label,
           v.changed_at
      FROM core_block_versions v WHERE v.event_id = $2 AND v.namespace = $1
    UNION ALL
    SELECT 6, 'proposed', NULL, b.base_version, b.diff_id, NULL, NULL, 'personal',
           b.agent_id, b.label, b.proposed_at
      FROM core_block_diffs b WHERE b.diff_id = $2 AND b.namespace = $1
) AS found ORDER BY rank LIMIT 1
"""


class PostgresWriteOutcomes:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def outcome(self, namespace: str, event_id: str) -> WriteOutcome | None:
        # A write's record is named by its namespace and event id (client/memstream_client/ids.py):
        # the record it stored, or the refusal that stands in its place.
        row = await self._pool.fetchrow(_OUTCOME, namespace, event_id,
                                        memory_record_id(namespace, event_id))
        if row is None:
            return None
        return WriteOutcome(
            namespace=namespace, event_id=event_id,
            outcome=cast(Outcome, row["outcome"]),
            decided_at=row["decided_at"],
            # A refusal names the id the record would have had: no record has it.
            record_id=None if row["outcome"] == "refused" else row["record_id"],
            version=row["version"], diff_id=row["diff_id"], reason=row["reason"],
            detail=row["detail"],
            scope=row["scope"], agent_id=row["agent_id"], block_label=row["block_label"])
