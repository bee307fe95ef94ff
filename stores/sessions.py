"""The session ledger: every event of every agent session, appended once by its event id in
the order the stage applied it. `Sessions` is the contract the stage and the routes use;
`PostgresSessions` keeps it in the source of truth."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import asyncpg

from memstream_client.events import Provenance


@dataclass(frozen=True)
class SessionEventRow:
    event_id: str
    namespace: str
    session_id: str
    agent_id: str
    type: str
    occurred_at: datetime
    producer: str
    payload: dict[str, Any]
    provenance: Provenance


@dataclass(frozen=True)
class SessionEntry:
    """A session event as the ledger holds it."""

    event_id: str
    type: str
    namespace: str
    session_id: str
    agent_id: str
    occurred_at: datetime
    producer: str
    payload: dict[str, Any]


SessionKey = tuple[str, str]


class Sessions(Protocol):
    async def append_session_events(self, rows: Sequence[SessionEventRow]) -> None:
        """Append to the ledger; an event already there is left as it is."""

    async def session_ledgers(self, sessions: Iterable[SessionKey]
                              ) -> dict[SessionKey, list[SessionEntry]]:
        """The events of each (namespace, session_id) that has any, in the order applied."""

    async def last_slept(self, namespace: str, agent_id: str) -> SessionEntry | None:
        """The agent's latest session.slept: its handoff is what the next wake reads."""


_COLUMNS = "event_id, type, namespace, session_id, agent_id, occurred_at, producer, payload"


class PostgresSessions:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def append_session_events(self, rows: Sequence[SessionEventRow]) -> None:
        await self._pool.executemany(
            """
            INSERT INTO session_events (event_id, namespace, session_id, agent_id, type,
                                        occurred_at, producer, payload, source_topic,
                                        source_partition, source_offset)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
            ON CONFLICT (event_id) DO NOTHING
            """,
            [(row.event_id, row.namespace, row.session_id, row.agent_id, row.type,
              row.occurred_at, row.producer, row.payload, row.provenance.source_topic,
              row.provenance.source_partition, row.provenance.source_offset)
             for row in rows])

    async def session_ledgers(self, sessions: Iterable[SessionKey]
                              ) -> dict[SessionKey, list[SessionEntry]]:
        pairs = list(dict.fromkeys(sessions))
        if not pairs:
            return {}
        rows = await self._pool.fetch(
            f"""
            SELECT {_COLUMNS} FROM session_events
            JOIN unnest($1::text[], $2::text[]) AS wanted (ns, sid)
              ON namespace = wanted.ns AND session_id = wanted.sid
            ORDER BY seq
            """,
            [namespace for namespace, _ in pairs], [session for _, session in pairs])
        ledgers: defaultdict[SessionKey, list[SessionEntry]] = defaultdict(list)
        for row in rows:
            entry = _entry(row)
            ledgers[(entry.namespace, entry.session_id)].append(entry)
        return dict(ledgers)

    async def last_slept(self, namespace: str, agent_id: str) -> SessionEntry | None:
        row = await self._pool.fetchrow(
            f"""
            SELECT {_COLUMNS} FROM session_events
            WHERE namespace = $1 AND agent_id = $2 AND type = 'session.slept'
            ORDER BY seq DESC LIMIT 1
            """,
            namespace, agent_id)
        return None if row is None else _entry(row)


def _entry(row: asyncpg.Record) -> SessionEntry:
    return SessionEntry(row["event_id"], row["type"], row["namespace"], row["session_id"],
                        row["agent_id"], row["occurred_at"], row["producer"], row["payload"])
