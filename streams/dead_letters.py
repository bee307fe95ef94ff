"""Dead letters: an unusable message goes to `<topic>.dlq` as its original bytes, with the
reason, the error and where it came from in headers, so it can be inspected and re-driven."""

from __future__ import annotations

from processors.intake import Rejection
from streams.messages import InboundMessage, Outbound

# Kafka's default max.message.bytes is 1 MiB: keep headroom for headers.
MAX_DLQ_VALUE_BYTES = 900 * 1024


def dead_letter(message: InboundMessage, rejection: Rejection) -> Outbound:
    value = message.value or b""
    truncated = len(value) > MAX_DLQ_VALUE_BYTES
    headers = (
        ("dlq.reason", rejection.reason.encode()),
        ("dlq.error", rejection.detail.encode()[:4000]),
        ("dlq.source.topic", message.topic.encode()),
        ("dlq.source.partition", str(message.partition).encode()),
        ("dlq.source.offset", str(message.offset).encode()),
        ("dlq.truncated", b"true" if truncated else b"false"),
    )
    return Outbound(
        topic=f"{message.topic}.dlq",
        key=message.key,
        value=value[:MAX_DLQ_VALUE_BYTES],
        headers=headers,
    )
