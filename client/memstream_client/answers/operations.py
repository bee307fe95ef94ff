"""Operators' answers: dead letters and API keys."""

from __future__ import annotations

from memstream_client.answers.base import Answer, Instant


class TopicPosition(Answer):
    topic: str | None
    partition: int | None
    offset: int | None


class DeadLetter(Answer):
    dead_letter_id: str
    dead_lettered_at: Instant
    namespace: str | None
    # The id of the event dead-lettered, when its value names one.
    event_id: str | None = None
    source: TopicPosition
    dlq: TopicPosition
    key: str | None
    reason: str
    error: str
    error_class: str | None
    retriable: bool | None
    first_bytes: str
    first_bytes_utf8: bool
    size: int
    truncated: bool
    replay_command: str | None


class DeadLetterList(Answer):
    # None: every namespace's, and those of none.
    namespace: str | None
    # Newest first.
    dead_letters: list[DeadLetter]
    # How many the filters select in all, and by reason.
    total: int
    by_reason: dict[str, int]
    # Lists the older ones (`before`); None on the last page.
    next: str | None


class ApiKey(Answer):
    key_id: str
    # None: every namespace (an operator's key).
    namespace: str | None
    permissions: list[str]
    agent_id: str | None
    label: str
    created_at: Instant
    revoked_at: Instant | None


class MadeKey(ApiKey):
    # Shown in this answer only.
    token: str


class KeyList(Answer):
    keys: list[ApiKey]
