"""`<topic>.dlq` → what is kept of each dead letter (processors/events/dead_letters.py: where, when,
why, the redacted first bytes, the namespace) → Postgres, for `GET /v1/dead-letters`.

Kept once by its id, which is where its event was read: the same event dead-lettered twice (a
worker killed before it acknowledged the event) or a dead-letter topic consumed again adds
nothing. Nothing here is dead-lettered, since a dead-letter topic has none of its own: a dead
letter Postgres refuses for good, or that crashes this stage every try, is logged, counted
(`memstream_dead_letters_read_total{outcome="unrecorded"}`) and left on its topic, where the
replay command still finds it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime

from processors.events.dead_letters import DeadLetterEntry, dead_letter_entry
from processors.events.errors import Unexpected
from streams.plumbing.batches import GiveUp
from streams.plumbing.dead_letters import headers_of
from streams.plumbing.messages import InboundMessage
from streams.plumbing.runtime import Runtime

log = logging.getLogger(__name__)


class DeadLetterLog:
    """The stages of one dead-letter topic's agent."""

    def __init__(self, runtime: Runtime, dlq: str) -> None:
        self._runtime = runtime
        self._attempts = runtime.attempts(dlq)

    async def prepare(self, messages: Sequence[InboundMessage]) -> list[DeadLetterEntry]:
        with self._runtime.stage("redact"):
            return [dead_letter_entry(
                message.topic, message.partition, message.offset, _moment(message),
                message.key, message.value or b"", headers_of(message))
                for message in messages]

    async def complete(self, entries: list[DeadLetterEntry]) -> None:
        runtime = self._runtime
        recorded: set[str] = set()

        async def record(part: Sequence[DeadLetterEntry]) -> None:
            recorded.update(await runtime.stores.dead_letters.record_dead_letters(part))

        with runtime.stage("postgres"):
            kept = await self._attempts.isolating(entries, record, what="dead-letter log")
        for entry in kept.done:
            outcome = "stored" if entry.dead_letter_id in recorded else "duplicate"
            # Once: the same event dead-lettered twice may come in one batch.
            recorded.discard(entry.dead_letter_id)
            runtime.metrics.dead_letters_read.labels(entry.dlq_topic, outcome).inc()
        for entry, error in kept.failed:
            _unrecorded(runtime, entry.dlq_topic, entry.dlq_partition, entry.dlq_offset,
                        error.detail)


def leave_on_topic(runtime: Runtime) -> GiveUp:
    """What becomes of dead letters that crash the stage every try: they stay on their topic,
    logged and counted, since there is no dead-letter topic to send them to."""

    async def give_up(messages: Sequence[InboundMessage], error: Unexpected) -> None:
        for message in messages:
            _unrecorded(runtime, message.topic, message.partition, message.offset,
                        error.detail)

    return give_up


def _unrecorded(runtime: Runtime, dlq: str, partition: int, offset: int, detail: str) -> None:
    log.error("dead letter %s/%d@%d not recorded, left on its topic: %s", dlq, partition,
              offset, detail)
    runtime.metrics.dead_letters_read.labels(dlq, "unrecorded").inc()


def _moment(message: InboundMessage) -> datetime:
    """When the message was dead-lettered: its broker timestamp, which the replay command's
    --since selects by."""
    if message.timestamp_ms is None:
        return datetime.now(UTC)
    return datetime.fromtimestamp(message.timestamp_ms / 1000, UTC)
