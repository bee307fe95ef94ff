"""Records as stored in Postgres (the source of truth) and indexed in Qdrant."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from memstream_client.events import (
    MemoryType,
    Provenance,
    RecordKind,
    ReviewState,
    Scope,
    Tier,
    TrustClass,
)


class Record(BaseModel):
    """One digest, memory or fix pattern; `text` is what gets embedded and returned."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    record_id: str
    namespace: str
    record_kind: RecordKind
    scope: Scope = "shared"
    agent_id: str | None = None
    title: str | None = None
    text: str
    body: dict[str, Any] = Field(default_factory=dict)
    memory_type: MemoryType | None = None
    tags: tuple[str, ...] = ()
    related_ids: tuple[str, ...] = ()
    tier: Tier = "active"
    review_state: ReviewState = "approved"
    trust_class: TrustClass = "raw"
    source_ref: str | None = None
    run_ref: str | None = None
    # The conversation, session or document a memory is one part of (see MemoryWritePayload).
    thread: str | None = None
    # Seed 002's keys: the repository a record belongs to (none: the whole namespace's), and
    # who may be shown it.
    repo: str | None = None
    security_scope: str | None = None
    provenance: Provenance
    created_at: datetime
    expires_at: datetime | None = None
    # When the fact stopped holding, and the memory that restated it with another value
    # (processors/knowledge/stale_facts.py): an invalidated memory leaves recall and stays in
    # history.
    valid_until: datetime | None = None
    invalidated_by: str | None = None
