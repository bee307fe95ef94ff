"""Dead letters: an unusable message goes to `<topic>.dlq` as its original bytes and key, with
the reason, the error and where it came from in headers, so that it can be inspected (GET
/v1/dead-letters) and replayed (python -m streams.commands.replay_dead_letters)."""

from __future__ import annotations

import logging
import shlex
from collections.abc import Sequence
from datetime import UTC

from processors.events.dead_letters import REASONS, DeadLetterEntry, DeadLetterHeaders
from processors.events.errors import Rejection
from schemas.topics import dead_letter_topic, source_of_dead_letters
from streams.plumbing.messages import InboundMessage, Outbound
from streams.plumbing.runtime import Runtime

log = logging.getLogger(__name__)

# Kafka's default max.message.bytes is 1 MiB: keep headroom for headers.
MAX_DLQ_VALUE_BYTES = 900 * 1024
MAX_DLQ_ERROR_BYTES = 4000
REASON_HEADER = "dlq.reason"
ERROR_HEADER = "dlq.error"
SOURCE_TOPIC_HEADER = "dlq.source.topic"
SOURCE_PARTITION_HEADER = "dlq.source.partition"
SOURCE_OFFSET_HEADER = "dlq.source.offset"
TRUNCATED_HEADER = "dlq.truncated"
# Set on an event republished from a DLQ (python -m streams.commands.replay_dead_letters).
REPLAY_HEADER = "dlq.replay.of"
REPLAY_COMMAND = "python -m streams.commands.replay_dead_letters"


def dead_letter(message: InboundMessage, rejection: Rejection) -> Outbound:
    value = message.value or b""
    truncated = len(value) > MAX_DLQ_VALUE_BYTES
    headers = (
        (REASON_HEADER, rejection.reason.encode()),
        # An error detail may quote text that has no UTF-8 form: escaped, never refused.
        (ERROR_HEADER,
         rejection.detail.encode("utf-8", "backslashreplace")[:MAX_DLQ_ERROR_BYTES]),
        (SOURCE_TOPIC_HEADER, message.topic.encode()),
        (SOURCE_PARTITION_HEADER, str(message.partition).encode()),
        (SOURCE_OFFSET_HEADER, str(message.offset).encode()),
        (TRUNCATED_HEADER, b"true" if truncated else b"false"),
    )
    return Outbound(
        topic=dead_letter_topic(message.topic),
        key=message.key,
        value=value[:MAX_DLQ_VALUE_BYTES],
        headers=headers,
    )


async def send_dead_letters(
    runtime: Runtime, rejected: Sequence[tuple[InboundMessage, Rejection]]
) -> None:
    """Count and dead-letter rejected messages, once each, in the order they were consumed.
    Waits for the broker as long as it takes: the messages are acked right after."""
    unique = {(m.topic, m.partition, m.offset): (m, r) for m, r in rejected}
    if not unique:
        return
    in_order = [unique[key] for key in sorted(unique)]
    for message, rejection in in_order:
        log.warning("dead-lettering %s/%d@%d: %s: %s", message.topic, message.partition,
                    message.offset, rejection.reason, rejection.detail[:300])
    topic = in_order[0][0].topic
    await runtime.attempts(topic).until_done(
        lambda: runtime.producer.produce([dead_letter(m, r) for m, r in in_order]),
        what="dead-lettering")
    for message, rejection in in_order:
        runtime.metrics.dlq.labels(message.topic, rejection.reason).inc()
        runtime.metrics.events.labels(message.topic, "rejected", "dlq").inc()


def headers_of(message: InboundMessage) -> DeadLetterHeaders:
    """What the headers of a message read from a dead-letter topic say."""
    found = dict(message.headers)
    return DeadLetterHeaders(
        reason=found.get(REASON_HEADER), error=found.get(ERROR_HEADER),
        source_topic=found.get(SOURCE_TOPIC_HEADER),
        source_partition=found.get(SOURCE_PARTITION_HEADER),
        source_offset=found.get(SOURCE_OFFSET_HEADER), truncated=found.get(TRUNCATED_HEADER))


def replay_command(entry: DeadLetterEntry) -> str | None:
    """The command that republishes this dead letter: its dead-letter topic, its reason, from
    its time on. The command selects no single dead letter, so this one also replays those of
    the same reason dead-lettered on that topic after it. None when the command would skip it:
    cut to fit the DLQ, or from another topic than the DLQ's source."""
    if entry.truncated or entry.source_topic not in (None,
                                                     source_of_dead_letters(entry.dlq_topic)):
        return None
    since = entry.dead_lettered_at.astimezone(UTC).isoformat(timespec="milliseconds")
    arguments = ["--topic", entry.dlq_topic,
                 *(["--reason", entry.reason] if entry.reason in REASONS else []),
                 "--since", since.replace("+00:00", "Z")]
    return f"{REPLAY_COMMAND} {shlex.join(arguments)}"
