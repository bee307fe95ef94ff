"""The worker's Kafka producer: announcements, dead letters and consolidation requests.

Idempotent (`enable_idempotence`): when the broker wrote a batch but its acknowledgement was
lost (a broker killed mid-request), the producer's own retry is recognised by the broker and
not written twice. Every send waits for all in-sync replicas (`acks=all`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from aiokafka import AIOKafkaProducer

from publisher.kafka_security import KafkaSecurity
from streams.plumbing.messages import Outbound


class KafkaProducer:
    def __init__(self, bootstrap: str, *, security: KafkaSecurity,
                 client_id: str = "memstream") -> None:
        self._bootstrap = bootstrap
        self._security = security
        self._client_id = client_id
        self._kafka: AIOKafkaProducer | None = None

    async def start(self) -> None:
        # aiokafka binds a client to the running loop: made here, not in __init__.
        self._kafka = AIOKafkaProducer(
            bootstrap_servers=self._bootstrap, client_id=self._client_id, acks="all",
            enable_idempotence=True, linger_ms=1, max_batch_size=512 * 1024,
            **self._security.client_options(),
        )
        await self._kafka.start()

    async def stop(self) -> None:
        kafka, self._kafka = self._kafka, None
        if kafka is not None:
            await kafka.stop()

    async def produce(self, messages: Sequence[Outbound]) -> None:
        """Send all messages and return once the broker has acknowledged every one."""
        if not messages:
            return
        if self._kafka is None:
            raise RuntimeError("the producer is not started")
        pending = [
            await self._kafka.send(m.topic, m.value, key=m.key, headers=list(m.headers))
            for m in messages
        ]
        await asyncio.gather(*pending)
