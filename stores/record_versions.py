"""Records and their versions, as the lifecycle of a memory sees them: the current record,
any earlier version, pending diffs, and the ledger of lifecycle events that makes each one
apply once. `RecordVersions` is the contract the stream stage uses; `PostgresRecordVersions`
keeps it in the source of truth."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, cast

import asyncpg

from memstream_client.events import ChangeKind, RecordKind
from processors.events.errors import MemstreamError
from processors.memory.lifecycle import (
    CONTENT_FIELDS,
    Current,
    Outcome,
    PendingDiff,
    RecordVersion,
    version_fields,
)
from processors.text.embedding import Vector
from processors.text.lexical import record_presence, record_vector
from schemas.records import Record
from stores.postgres.rows import LIVE_MEMORY, record_of, refresh_confidence

VERSION_COLUMNS = "record_id, version, text, body, fields, change, actor, event_id," \
    " changed_at, changed, reason"
# A new version's columns: what is read back, and the namespace its feed is read by.
_INSERTED_COLUMNS = f"{VERSION_COLUMNS}, namespace"
# Characters of a version's text a feed of changes shows.
EXCERPT_CHARS = 200
_DIFF_COLUMNS = "diff_id, namespace, record_id, base_version, proposed, proposer," \
    " proposed_at, state, decided_by"


@dataclass(frozen=True)
class AppliedEvent:
    """A lifecycle event found applied: a replay of it changes nothing, and is announced
    only if its announcement may be missing."""

    event_id: str
    record_id: str
    # What it changed; None when it changed nothing.
    change: ChangeKind | None
    version: int
    applied_at: datetime
    announced: bool


@dataclass(frozen=True)
class StoredCurrent:
    current: Current
    vector: Vector | None
    # Versions that changed its content (text, title, type, tags, related ids).
    updates: int = 0


@dataclass(frozen=True)
class Saved:
    """A lifecycle event stored: the record as it left it, the versions it made of it (a
    change, then maybe a promotion), and the records it superseded with their versions."""

    record: Record
    version: int
    versions: list[tuple[ChangeKind, int]]
    superseded: list[tuple[Record, int]]


@dataclass(frozen=True)
class ChangedRecord:
    """A record as a lifecycle event left it: what an announcement needs."""

    record: Record
    change: ChangeKind
    version: int
    vector: Vector | None


@dataclass(frozen=True)
class ExpiredRecord:
    record: Record
    version: int
    expired_at: datetime


class ExpiringRecords(Protocol):
    async def expire_due(self, cutoffs: Mapping[RecordKind, datetime],
                         limit: int) -> list[ExpiredRecord]:
        """Mark up to `limit` records expired (past their expires_at, or changed last before
        their kind's cutoff), each as a new version; return them."""

    async def unannounced_expired(self, older_than: timedelta,
                                  limit: int) -> list[ExpiredRecord]:
        """Records marked expired at least `older_than` ago whose announcement may be
        missing (younger ones may still be on their way, from another worker)."""


@dataclass(frozen=True)
class ChangePosition:
    """Where a version stands in its namespace's feed of changes: versions are listed in the
    order of (changed_at, record_id, version), which no later version can come before."""

    changed_at: datetime
    record_id: str
    version: int

    @property
    def key(self) -> tuple[datetime, str, int]:
        return self.changed_at, self.record_id, self.version


# Before every version: the position a feed is read from when no cursor is given.
_FEED_START = ChangePosition(datetime.min.replace(tzinfo=UTC), "", 0)


@dataclass(frozen=True)
class VersionChange:
    """One version of a record, as a feed of changes lists it: what changed, who did it, and
    enough of the record (as this version left it) to tell which one it is."""

    position: ChangePosition
    change: ChangeKind
    actor: str | None
    event_id: str
    changed: tuple[str, ...]
    reason: str | None
    title: str | None
    excerpt: str
    record_kind: RecordKind
    memory_type: str | None
    scope: str
    agent_id: str | None


@dataclass(frozen=True)
class PersonalReader:
    """Whose personal records a read may list beside the shared ones: one agent's, every
    agent's, or (agent None, every_agent False) none."""

    agent_id: str | None
    every_agent: bool = False


@dataclass(frozen=True)
class MergeMember:
    """A record a merge replaces, as stored now: live while the merge is a draft (or if it was
    rejected), superseded by it once approved."""

    record_id: str
    version: int
    title: str | None
    # The first EXCERPT_CHARS characters of its text.
    excerpt: str
    review_state: str
    superseded_by: str | None


@dataclass(frozen=True)
class DraftMerge:
    """A consolidation merge waiting for a reviewer: live, a draft, with its members."""

    record_id: str
    version: int
    title: str | None
    text: str
    memory_type: str | None
    scope: str
    agent_id: str | None
    # Who asked for the consolidation that proposed it, and when it was stored.
    proposer: str
    proposed_at: datetime
    members: tuple[MergeMember, ...]


@dataclass(frozen=True)
class ProposedLearningDraft:
    """A lesson or pattern the system derived (from runs: processors/runs/learnings.py),
    waiting for a reviewer: live, a draft."""

    record_id: str
    version: int
    title: str | None
    text: str
    memory_type: str
    scope: str
    agent_id: str | None
    # What it is learnt from (a fix pattern, a task key) and the digests of its runs.
    source_ref: str | None
    related_ids: tuple[str, ...]
    proposer: str
    proposed_at: datetime


class VersionConflict(MemstreamError):
    """The record changed between reading it and saving its next version (the consolidator
    superseded it): read it again and decide again."""

    retriable = True


class RecordVersions(ExpiringRecords, Protocol):
    async def applied(self, event_id: str) -> AppliedEvent | None: ...

    async def applied_ids(self, event_ids: Sequence[str]) -> set[str]:
        """Those of these events that were applied (a write folded into its twin is)."""

    async def current(self, namespace: str, record_id: str) -> StoredCurrent | None: ...

    async def version(self, namespace: str, record_id: str,
                      version: int) -> RecordVersion | None: ...

    async def history(self, namespace: str, record_id: str) -> list[RecordVersion] | None: ...

    async def pending_diff(self, namespace: str, diff_id: str) -> PendingDiff | None: ...

    async def changes(self, namespace: str, after: ChangePosition | None, limit: int,
                      reader: PersonalReader) -> list[VersionChange]:
        """Up to `limit` versions of the namespace's records made after `after` (from the
        first when None), in feed order, of the records `reader` may see. Only versions no
        transaction still running can come before are listed, so a reader that resumes
        after the last one it got misses none."""

    async def pending_diffs(self, namespace: str, record_id: str | None, limit: int,
                            reader: PersonalReader) -> list[PendingDiff]:
        """The pending diffs of the namespace's records `reader` may see, oldest first."""

    async def draft_merges(self, namespace: str, record_id: str | None, limit: int,
                           reader: PersonalReader) -> list[DraftMerge]:
        """The live draft merges of the namespace that `reader` may see, oldest first, with
        their members; with `record_id`, the one that is that record or merges it."""

    async def proposed_learnings(self, namespace: str, record_id: str | None, limit: int,
                                 reader: PersonalReader) -> list[ProposedLearningDraft]:
        """The live derived lessons and patterns of the namespace still drafts (merges
        aside) that `reader` may see, oldest first; with `record_id`, that one."""

    async def save(self, event_id: str, event_type: str, base_version: int,
                   outcome: Outcome, vector: Vector | None) -> Saved:
        """Store what a lifecycle event did, with the event, in one transaction. Raises
        `VersionConflict` if the record is no longer at `base_version`."""

    async def changed_by(self, event_id: str) -> list[ChangedRecord]:
        """The records the event gave a version, as they are now (the event's record first),
        for announcing them again."""

    async def mark_announced(self, event_id: str) -> None: ...


class PostgresRecordVersions:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def applied(self, event_id: str) -> AppliedEvent | None:
        row = await self._pool.fetchrow(
            "SELECT event_id, record_id, outcome, version, applied_at, announced_at"
            " FROM lifecycle_events WHERE event_id = $1", event_id)
        if row is None:
            return None
        outcome = row["outcome"]
        change = None if outcome == "unchanged" else cast(ChangeKind, outcome)
        return AppliedEvent(row["event_id"], row["record_id"], change,
                            int(row["version"]), row["applied_at"],
                            row["announced_at"] is not None)

    async def applied_ids(self, event_ids: Sequence[str]) -> set[str]:
        rows = await self._pool.fetch(
            "SELECT event_id FROM lifecycle_events WHERE event_id = ANY($1::text[])",
            list(event_ids))
        return {row["event_id"] for row in rows}

    async def current(self, namespace: str, record_id: str) -> StoredCurrent | None:
        row = await self._pool.fetchrow(
            "SELECT r.*, (SELECT count(*) FROM record_versions v WHERE v.record_id = r.record_id"
            "  AND v.changed && $3::text[]) AS updates"
            " FROM records r WHERE r.namespace = $1 AND r.record_id = $2",
            namespace, record_id, list(CONTENT_FIELDS))
        if row is None:
            return None
        return StoredCurrent(Current(record_of(row), int(row["version"]), row["superseded_by"]),
                             row["embedding"], int(row["updates"]))

    async def version(self, namespace: str, record_id: str,
                      version: int) -> RecordVersion | None:
        row = await self._pool.fetchrow(
            f"SELECT {_prefixed(VERSION_COLUMNS, 'v')} FROM record_versions v"
            " JOIN records r USING (record_id)"
            " WHERE r.namespace = $1 AND v.record_id = $2 AND v.version = $3",
            namespace, record_id, version)
        return None if row is None else version_of(row)

    async def history(self, namespace: str, record_id: str) -> list[RecordVersion] | None:
        rows = await self._pool.fetch(
            f"SELECT {_prefixed(VERSION_COLUMNS, 'v')} FROM record_versions v"
            " JOIN records r USING (record_id)"
            " WHERE r.namespace = $1 AND v.record_id = $2 ORDER BY v.version",
            namespace, record_id)
        return [version_of(row) for row in rows] or None

    async def pending_diff(self, namespace: str, diff_id: str) -> PendingDiff | None:
        row = await self._pool.fetchrow(
            f"SELECT {_DIFF_COLUMNS} FROM pending_diffs WHERE namespace = $1 AND diff_id = $2",
            namespace, diff_id)
        return None if row is None else _diff_of(row)

    async def changes(self, namespace: str, after: ChangePosition | None, limit: int,
                      reader: PersonalReader) -> list[VersionChange]:
        async with self._pool.acquire() as connection:
            # A version's changed_at is its transaction's start, so one still running may yet
            # commit versions older than those visible now. Read first when the oldest running
            # transaction began, then (a later snapshot) only the versions before it.
            horizon = await connection.fetchval(
                "SELECT LEAST(now(), min(xact_start)) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                " AND xact_start IS NOT NULL")
            rows = await connection.fetch(
                """
                SELECT v.record_id, v.version, v.change, v.actor, v.event_id, v.changed_at,
                       v.changed, v.reason, v.fields ->> 'title' AS title,
                       left(v.text, $9) AS excerpt, v.fields ->> 'memory_type' AS memory_type,
                       r.record_kind, r.scope, r.agent_id
                FROM record_versions v JOIN records r USING (record_id)
                WHERE v.namespace = $1 AND v.changed_at < $2
                  AND (v.changed_at, v.record_id, v.version) > ($5, $6, $7)
                  AND (r.scope <> 'personal' OR $3 OR r.agent_id = $4)
                ORDER BY v.changed_at, v.record_id, v.version
                LIMIT $8
                """,
                namespace, horizon, reader.every_agent, reader.agent_id,
                *(after or _FEED_START).key, limit, EXCERPT_CHARS)
        return [VersionChange(
            ChangePosition(row["changed_at"], row["record_id"], int(row["version"])),
            cast(ChangeKind, row["change"]), row["actor"], row["event_id"],
            tuple(row["changed"]), row["reason"], row["title"], row["excerpt"],
            cast(RecordKind, row["record_kind"]), row["memory_type"], row["scope"],
            row["agent_id"]) for row in rows]

    async def pending_diffs(self, namespace: str, record_id: str | None, limit: int,
                            reader: PersonalReader) -> list[PendingDiff]:
        rows = await self._pool.fetch(
            f"SELECT {_prefixed(_DIFF_COLUMNS, 'd')} FROM pending_diffs d"
            " JOIN records r USING (record_id)"
            # A diff of a record merged or invalidated since can no longer apply: it awaits
            # nobody.
            " WHERE d.namespace = $1 AND d.state = 'pending'"
            " AND r.superseded_by IS NULL AND r.invalidated_by IS NULL"
            " AND ($2::text IS NULL OR d.record_id = $2)"
            " AND (r.scope <> 'personal' OR $4 OR r.agent_id = $5)"
            " ORDER BY d.proposed_at, d.diff_id LIMIT $3",
            namespace, record_id, limit, reader.every_agent, reader.agent_id)
        return [_diff_of(row) for row in rows]

    async def draft_merges(self, namespace: str, record_id: str | None, limit: int,
                           reader: PersonalReader) -> list[DraftMerge]:
        async with self._pool.acquire() as connection:
            rows = await connection.fetch(
                f"""
                SELECT record_id, version, title, text, memory_type, scope, agent_id, stored_at,
                       provenance ->> 'producer' AS proposer, body -> 'merged_from' AS members
                FROM records
                WHERE namespace = $1 AND {LIVE_MEMORY} AND review_state = 'draft'
                  AND body ? 'merged_from'
                  AND ($2::text IS NULL OR record_id = $2 OR body -> 'merged_from' ? $2)
                  AND (scope <> 'personal' OR $4 OR agent_id = $5)
                ORDER BY stored_at, record_id LIMIT $3
                """,
                namespace, record_id, limit, reader.every_agent, reader.agent_id)
            members = await merge_members(connection, namespace,
                                          {row["record_id"]: row["members"] for row in rows})
        return [DraftMerge(
            record_id=row["record_id"], version=int(row["version"]), title=row["title"],
            text=row["text"], memory_type=row["memory_type"], scope=row["scope"],
            agent_id=row["agent_id"], proposer=row["proposer"], proposed_at=row["stored_at"],
            members=tuple(members[row["record_id"]])) for row in rows]

    async def proposed_learnings(self, namespace: str, record_id: str | None, limit: int,
                                 reader: PersonalReader) -> list[ProposedLearningDraft]:
        rows = await self._pool.fetch(
            f"""
            SELECT record_id, version, title, text, memory_type, scope, agent_id, source_ref,
                   related_ids, stored_at, provenance ->> 'producer' AS proposer
            FROM records
            WHERE namespace = $1 AND {LIVE_MEMORY} AND review_state = 'draft'
              AND trust_class = 'derived' AND memory_type IN ('lesson', 'pattern')
              AND NOT body ? 'merged_from'
              AND ($2::text IS NULL OR record_id = $2)
              AND (scope <> 'personal' OR $4 OR agent_id = $5)
            ORDER BY stored_at, record_id LIMIT $3
            """,
            namespace, record_id, limit, reader.every_agent, reader.agent_id)
        return [ProposedLearningDraft(
            record_id=row["record_id"], version=int(row["version"]), title=row["title"],
            text=row["text"], memory_type=row["memory_type"], scope=row["scope"],
            agent_id=row["agent_id"], source_ref=row["source_ref"],
            related_ids=tuple(row["related_ids"]), proposer=row["proposer"],
            proposed_at=row["stored_at"]) for row in rows]

    async def save(self, event_id: str, event_type: str, base_version: int,
                   outcome: Outcome, vector: Vector | None) -> Saved:
        record = outcome.record
        versions: list[tuple[ChangeKind, int]] = []
        superseded: list[tuple[Record, int]] = []
        async with self._pool.acquire() as connection, connection.transaction():
            version = await connection.fetchval(
                "SELECT version FROM records WHERE record_id = $1 FOR UPDATE",
                record.record_id)
            if version != base_version:
                raise VersionConflict(f"{record.record_id} moved from version {base_version} "
                                      f"to {version}")
            if outcome.new_version and outcome.change != "unchanged":
                version = base_version + 1
                await _store_version(connection, record, version, vector, event_id,
                                     _VersionNote(outcome.change, outcome.actor,
                                                  outcome.changed, outcome.reason))
                versions.append((outcome.change, version))
                if outcome.promoted_to is not None:
                    note = _VersionNote("promoted", outcome.actor, ("tier",),
                                        f"{record.tier} to {outcome.promoted_to} after "
                                        "its updates")
                    record = record.model_copy(update={"tier": outcome.promoted_to})
                    version += 1
                    await _store_version(connection, record, version, None, event_id, note)
                    versions.append(("promoted", version))
                if outcome.supersedes:
                    superseded = await _supersede(connection, record, outcome.supersedes,
                                                  event_id, outcome.actor)
            if outcome.proposal is not None:
                await _propose(connection, outcome.proposal)
            if outcome.decided is not None:
                diff_id, state = outcome.decided
                await connection.execute(
                    "UPDATE pending_diffs SET state = $2, decided_by = $3, decided_at = now(),"
                    " decision_event_id = $4 WHERE diff_id = $1 AND state = 'pending'",
                    diff_id, state, outcome.actor, event_id)
            await connection.execute(
                "INSERT INTO lifecycle_events (event_id, namespace, record_id, type, outcome,"
                " version) VALUES ($1, $2, $3, $4, $5, $6)",
                event_id, record.namespace, record.record_id, event_type, outcome.change,
                version)
        return Saved(record, int(version), versions, superseded)

    async def changed_by(self, event_id: str) -> list[ChangedRecord]:
        rows = await self._pool.fetch(
            "SELECT r.*, v.change, v.version AS changed_version FROM record_versions v"
            " JOIN records r USING (record_id) WHERE v.event_id = $1"
            " ORDER BY v.change = 'superseded', r.record_id, v.version", event_id)
        return [ChangedRecord(record_of(row), cast(ChangeKind, row["change"]),
                              int(row["changed_version"]), row["embedding"]) for row in rows]

    async def expire_due(self, cutoffs: Mapping[RecordKind, datetime],
                         limit: int) -> list[ExpiredRecord]:
        async with self._pool.acquire() as connection, connection.transaction():
            rows = await connection.fetch(
                """
                WITH due AS (
                    SELECT record_id,
                           CASE WHEN expires_at <= now() THEN 'its expires_at passed'
                                ELSE 'older than the retention of ' || record_kind END AS why
                    FROM records
                    WHERE expired_at IS NULL AND superseded_by IS NULL
                      AND (expires_at <= now() OR EXISTS (
                          SELECT 1 FROM unnest($1::text[], $2::timestamptz[]) AS c (kind, cutoff)
                          WHERE c.kind = records.record_kind AND records.updated_at <= c.cutoff))
                    ORDER BY record_id LIMIT $3 FOR UPDATE SKIP LOCKED)
                UPDATE records SET expired_at = now(), version = version + 1, updated_at = now(),
                       expires_at = LEAST(COALESCE(expires_at, now()), now()),
                       announced_at = NULL
                FROM due WHERE records.record_id = due.record_id
                RETURNING records.*, due.why
                """,
                list(cutoffs), list(cutoffs.values()), limit)
            expired = [ExpiredRecord(record_of(row), int(row["version"]), row["expired_at"])
                       for row in rows]
            await connection.executemany(
                f"INSERT INTO record_versions ({_INSERTED_COLUMNS})"
                " VALUES ($1, $2, $3, $4, $5, 'expired', 'retention', $6, now(),"
                " '{expires_at}', $7, $8)",
                [(row["record_id"], row["version"], row["text"], row["body"],
                  version_fields(record_of(row)), f"retention:{row['expired_at'].isoformat()}",
                  row["why"], row["namespace"]) for row in rows])
        return expired

    async def unannounced_expired(self, older_than: timedelta,
                                  limit: int) -> list[ExpiredRecord]:
        rows = await self._pool.fetch(
            "SELECT * FROM records WHERE expired_at < now() - $1::interval"
            " AND announced_at IS NULL AND superseded_by IS NULL ORDER BY expired_at LIMIT $2",
            older_than, limit)
        return [ExpiredRecord(record_of(row), int(row["version"]), row["expired_at"])
                for row in rows]

    async def mark_announced(self, event_id: str) -> None:
        await self._pool.execute(
            "UPDATE lifecycle_events SET announced_at = now()"
            " WHERE event_id = $1 AND announced_at IS NULL", event_id)


@dataclass(frozen=True)
class _VersionNote:
    """What history says of a version beside its content."""

    change: ChangeKind
    actor: str
    changed: tuple[str, ...]
    reason: str | None


async def _store_version(connection: asyncpg.Connection, record: Record, version: int,
                         vector: Vector | None, event_id: str, note: _VersionNote) -> None:
    lexical = record_vector(record)
    await connection.execute(
        """
        UPDATE records SET title = $2, text = $3, body = $4, memory_type = $5, tags = $6,
               text_tokens = CASE WHEN text = $3 THEN text_tokens END,
               related_ids = $7, review_state = $8, trust_class = $9, tier = $10,
               embedding = COALESCE($11, embedding), lexical = $12, lexical_terms = $13,
               version = $14, valid_until = $15, invalidated_by = $16, updated_at = now(),
               announced_at = NULL, term_presence = $17
        WHERE record_id = $1
        """,
        record.record_id, record.title, record.text, record.body, record.memory_type,
        list(record.tags), list(record.related_ids), record.review_state, record.trust_class,
        record.tier, vector, lexical, list(lexical.indices), version, record.valid_until,
        record.invalidated_by, record_presence(record))
    await refresh_confidence(connection, record.namespace, [record.record_id])
    await connection.execute(
        f"INSERT INTO record_versions ({_INSERTED_COLUMNS})"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now(), $9, $10, $11)",
        record.record_id, version, record.text, record.body, version_fields(record),
        note.change, note.actor, event_id, list(note.changed), note.reason, record.namespace)


async def _supersede(connection: asyncpg.Connection, by: Record, member_ids: tuple[str, ...],
                     event_id: str, actor: str) -> list[tuple[Record, int]]:
    """Point the live members at `by`, each as a new version of itself."""
    rows = await connection.fetch(
        """
        UPDATE records SET superseded_by = $3, version = version + 1, updated_at = now()
        FROM unnest($2::text[]) AS wanted (id)
        WHERE records.record_id = wanted.id AND records.namespace = $1
          AND records.superseded_by IS NULL AND records.record_id <> $3
        RETURNING records.*
        """,
        by.namespace, list(member_ids), by.record_id)
    members = [(record_of(row), int(row["version"])) for row in rows]
    await connection.executemany(
        f"INSERT INTO record_versions ({_INSERTED_COLUMNS})"
        " VALUES ($1, $2, $3, $4, $5, 'superseded', $6, $7, now(), '{}', $8, $9)",
        [(member.record_id, version, member.text, {**member.body, "superseded_by": by.record_id},
          version_fields(member), actor, event_id, f"merged into {by.record_id}",
          member.namespace)
         for member, version in members])
    return members


async def _propose(connection: asyncpg.Connection, diff: PendingDiff) -> None:
    """Keep a proposal; the older pending ones of the record are superseded by it."""
    await connection.execute(
        "UPDATE pending_diffs SET state = 'superseded', decided_at = now(),"
        " decision_event_id = $2 WHERE record_id = $1 AND state = 'pending'",
        diff.record_id, diff.diff_id)
    await connection.execute(
        f"INSERT INTO pending_diffs ({_DIFF_COLUMNS})"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', NULL)",
        diff.diff_id, diff.namespace, diff.record_id, diff.base_version, dict(diff.proposed),
        diff.proposer, diff.proposed_at)


async def merge_members(connection: asyncpg.Connection, namespace: str,
                        merges: Mapping[str, Sequence[str]]) -> dict[str, list[MergeMember]]:
    """The members of each merge (merge id -> the ids its body names), as stored now, in id
    order; a member the namespace does not hold is left out."""
    found: dict[str, list[MergeMember]] = {merge_id: [] for merge_id in merges}
    pairs = [(merge_id, member) for merge_id, member_ids in merges.items()
             for member in member_ids]
    if not pairs:
        return found
    rows = await connection.fetch(
        """
        SELECT wanted.merge_id, r.record_id, r.version, r.title, left(r.text, $4) AS excerpt,
               r.review_state, r.superseded_by
        FROM unnest($2::text[], $3::text[]) AS wanted (merge_id, member_id)
        JOIN records r ON r.record_id = wanted.member_id
        WHERE r.namespace = $1 ORDER BY wanted.merge_id, r.record_id
        """,
        namespace, [merge_id for merge_id, _ in pairs], [member for _, member in pairs],
        EXCERPT_CHARS)
    for row in rows:
        found[row["merge_id"]].append(MergeMember(
            record_id=row["record_id"], version=int(row["version"]), title=row["title"],
            excerpt=row["excerpt"], review_state=row["review_state"],
            superseded_by=row["superseded_by"]))
    return found


def version_of(row: Mapping[str, Any]) -> RecordVersion:
    return RecordVersion(
        record_id=row["record_id"], version=int(row["version"]), text=row["text"],
        body=row["body"], fields=row["fields"], change=row["change"], actor=row["actor"],
        event_id=row["event_id"], changed_at=row["changed_at"],
        changed=tuple(row["changed"]), reason=row["reason"])


def _diff_of(row: Mapping[str, Any]) -> PendingDiff:
    return PendingDiff(
        diff_id=row["diff_id"], namespace=row["namespace"], record_id=row["record_id"],
        base_version=int(row["base_version"]), proposed=row["proposed"],
        proposer=row["proposer"], proposed_at=row["proposed_at"], state=row["state"],
        decided_by=row["decided_by"])


def _prefixed(columns: str, alias: str) -> str:
    return ", ".join(f"{alias}.{column.strip()}" for column in columns.split(","))

