"""The broker-side facts about one consumed message, independent of Faust's event type."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from memstream_client.events import Provenance


@dataclass(frozen=True)
class InboundMessage:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()
    # The broker's timestamp of the message, in milliseconds since the epoch.
    timestamp_ms: int | None = None

    def provenance(self, event_id: str, producer: str) -> Provenance:
        return Provenance(
            source_event_id=event_id,
            source_topic=self.topic,
            source_partition=self.partition,
            source_offset=self.offset,
            producer=producer,
        )


@dataclass(frozen=True)
class Outbound:
    """A message to produce: the producer waits for the broker's acknowledgement."""

    topic: str
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...] = ()


def seconds_since(moment: datetime, now: datetime) -> float:
    return max(0.0, (now - moment).total_seconds())
