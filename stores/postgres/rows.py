"""What the Postgres stores share: the pool every store opens, and records as rows of the
`records` table (its columns, a row as a `Record`, a record's first version)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg

from memstream_client.events import Provenance
from processors.memory.lifecycle import version_fields
from processors.recall.confidence import NO_VOTES, Votes, confidence_of, votes_of
from processors.text.embedding import Vector
from processors.text.lexical import record_presence, record_vector
from schemas.records import Record
from stores.postgres.codecs import register_codecs


async def create_pool(dsn: str, *, min_size: int = 1, max_size: int = 4) -> asyncpg.Pool:
    """A pool whose connections read and write `vector` as numpy arrays and `jsonb` as dicts."""
    pool = await asyncpg.create_pool(
        dsn, min_size=min_size, max_size=max_size, init=register_codecs, reset=keep_session
    )
    assert pool is not None  # create_pool only returns None when awaited without a loop
    return pool


async def keep_session(connection: asyncpg.Connection) -> None:
    """What a pooled connection needs on its way back to the pool beyond the rollback of a
    transaction left open (which asyncpg always does): nothing. The stores leave no session
    state behind (no SET, LISTEN, cursor or session advisory lock: their locks are
    transaction-scoped), and asyncpg's default reset (`RESET ALL`, `UNLISTEN *`, ...) was one
    more round trip on every use: 3% of the event loop's time in a context pack."""


RECORD_COLUMNS = (
    "record_id, namespace, record_kind, scope, agent_id, title, text, body, memory_type, tags,"
    " related_ids, tier, review_state, trust_class, source_ref, run_ref, provenance,"
    " source_event_id, created_at, expires_at, embedding, thread, lexical, lexical_terms, repo,"
    " security_scope, valid_until, invalidated_by, confidence"
)
# A new record's row: its columns, and how fully it holds each of its terms (search reads it).
INSERT_RECORD = (
    f"INSERT INTO records ({RECORD_COLUMNS}, term_presence) VALUES"
    f" ({', '.join(f'${n}' for n in range(1, 31))})"
)
# A memory still in force: not merged into another, deprecated, invalidated or past its
# expiry.
LIVE_MEMORY = ("record_kind = 'memory' AND superseded_by IS NULL AND review_state <> 'deprecated'"
               " AND invalidated_by IS NULL AND (expires_at IS NULL OR expires_at > now())")
INSERT_VERSION = (
    "INSERT INTO record_versions (record_id, version, text, body, event_id, fields, change,"
    " actor, namespace) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
)


def record_of(row: Mapping[str, Any]) -> Record:
    return Record(
        record_id=row["record_id"], namespace=row["namespace"],
        record_kind=row["record_kind"], scope=row["scope"], agent_id=row["agent_id"],
        title=row["title"], text=row["text"], body=row["body"],
        memory_type=row["memory_type"], tags=tuple(row["tags"]),
        related_ids=tuple(row["related_ids"]), tier=row["tier"],
        review_state=row["review_state"], trust_class=row["trust_class"],
        source_ref=row["source_ref"], run_ref=row["run_ref"], thread=row["thread"],
        repo=row["repo"], security_scope=row["security_scope"],
        provenance=Provenance.model_validate(row["provenance"]),
        created_at=row["created_at"], expires_at=row["expires_at"],
        valid_until=row["valid_until"], invalidated_by=row["invalidated_by"],
    )


def record_args(record: Record, vector: Vector) -> tuple[Any, ...]:
    """The values of INSERT_RECORD."""
    lexical = record_vector(record)
    return (
        record.record_id, record.namespace, record.record_kind, record.scope, record.agent_id,
        record.title, record.text, record.body, record.memory_type, list(record.tags),
        list(record.related_ids), record.tier, record.review_state, record.trust_class,
        record.source_ref, record.run_ref, record.provenance.model_dump(),
        record.provenance.source_event_id, record.created_at, record.expires_at, vector,
        record.thread, lexical, list(lexical.indices), record.repo, record.security_scope,
        record.valid_until, record.invalidated_by, record_confidence(record),
        record_presence(record),
    )


def record_confidence(record: Record, votes: Votes = NO_VOTES) -> float:
    """The confidence kept with a record (processors/recall/confidence.py): agents' votes are
    counted by the stores that know them."""
    return confidence_of(record.trust_class, record.review_state,
                         int(record.body.get("restated", 0)), votes)


async def insert_new_records(connection: asyncpg.Connection,
                             records: Sequence[tuple[Record, Vector]]) -> None:
    """Store records with their first version, made by the event that made the record;
    a record stored already stays as it is."""
    await connection.executemany(
        f"{INSERT_RECORD} ON CONFLICT (record_id) DO NOTHING",
        [record_args(record, vector) for record, vector in records],
    )
    await connection.executemany(
        f"{INSERT_VERSION} ON CONFLICT (record_id, version) DO NOTHING",
        [(record.record_id, 1, record.text, record.body, record.provenance.source_event_id,
          version_fields(record), "created", record.provenance.producer, record.namespace)
         for record, _ in records],
    )


async def refresh_confidence(connection: asyncpg.Connection, namespace: str,
                             record_ids: Sequence[str]) -> None:
    """Compute again the confidence of these records of the namespace, from their fields and
    the votes of the agents that rated them (in the caller's transaction)."""
    rows = await connection.fetch(
        """
        SELECT r.record_id, r.trust_class, r.review_state, r.body, s.agent_id,
               s.valuation_count, s.useful_count
        FROM unnest($2::text[]) AS wanted (id)
        JOIN records r ON r.record_id = wanted.id AND r.namespace = $1
        LEFT JOIN memory_scores s ON s.namespace = r.namespace AND s.memory_id = r.record_id
                                 AND s.valuation_count > 0
        """,
        namespace, list(record_ids))
    fields: dict[str, tuple[str, str, int]] = {}
    per_agent: dict[str, dict[str, tuple[int, int]]] = {}
    for row in rows:
        fields[row["record_id"]] = (row["trust_class"], row["review_state"],
                                    int(row["body"].get("restated", 0)))
        ratings = per_agent.setdefault(row["record_id"], {})
        if row["agent_id"] is not None:
            ratings[row["agent_id"]] = (int(row["valuation_count"]), int(row["useful_count"]))
    await connection.executemany(
        "UPDATE records SET confidence = $2 WHERE record_id = $1",
        [(record_id, confidence_of(trust, review, restated, votes_of(per_agent[record_id])))
         for record_id, (trust, review, restated) in sorted(fields.items())])
