"""How a stage reads its batch, the one way: each message parsed into an event of the types
the stage takes (processors/events/intake.py), or rejected with the reason its dead letter
will carry; timed as the stage's `validate` step."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from pydantic import BaseModel

from processors.events.errors import Rejected, Rejection
from processors.events.intake import Parsed, parse_event
from streams.plumbing.messages import InboundMessage
from streams.plumbing.runtime import Runtime

E = TypeVar("E", bound=BaseModel)


@dataclass(frozen=True)
class ParsedBatch(Generic[E]):
    """A batch as parsed, in the order consumed: the messages rejected with why, and the
    events of the others."""

    rejected: list[tuple[InboundMessage, Rejection]] = field(default_factory=list)
    parsed: list[tuple[InboundMessage, Parsed[E]]] = field(default_factory=list)


def parse_batch(runtime: Runtime, messages: Sequence[InboundMessage],
                accepted: Mapping[str, type[E]]) -> ParsedBatch[E]:
    """Each message as an event of one of the `accepted` types, or rejected."""
    batch: ParsedBatch[E] = ParsedBatch()
    with runtime.stage("validate"):
        for message in messages:
            try:
                batch.parsed.append((message, parse_event(message.value, accepted,
                                                          runtime.max_event_bytes)))
            except Rejected as exc:
                batch.rejected.append((message, exc.rejection))
    return batch
