"""Writes accepted (202): published to Kafka, applied by the worker once."""

from __future__ import annotations

from schemas.answers.base import Answer


class MemoryWritten(Answer):
    # The id the memory will have once the worker stores it.
    record_id: str
    event_id: str
    topic: str


class ChangeAccepted(Answer):
    """An update, deprecation, restore or review, accepted. An update of a protected record
    waits for review: its event id is the pending diff's id."""

    record_id: str | None
    event_id: str


class BlockEditAccepted(Answer):
    agent_id: str
    label: str
    event_id: str
