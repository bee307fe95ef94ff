"""Reading and writing topics from tests and benchmarks with plain aiokafka."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import GroupCoordinatorNotAvailableError

from publisher.kafka_security import PLAINTEXT, KafkaSecurity
from streams.plumbing.topics import partitions_of


@dataclass(frozen=True)
class Received:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: dict[str, bytes]
    received_at: float


async def produce(
    bootstrap: str, topic: str, messages: Sequence[tuple[bytes | None, bytes]],
    security: KafkaSecurity = PLAINTEXT,
) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                                **security.client_options())
    await producer.start()
    try:
        pending = [await producer.send(topic, value, key=key) for key, value in messages]
        await asyncio.gather(*pending)
    finally:
        await producer.stop()


@dataclass
class TopicReader:
    """Reads a topic from its beginning (no consumer group) into `messages`, in the
    background, until closed."""

    bootstrap: str
    topic: str
    security: KafkaSecurity = PLAINTEXT
    messages: list[Received] = field(default_factory=list)
    _consumer: AIOKafkaConsumer | None = None
    _task: asyncio.Task[None] | None = None

    async def start(self) -> TopicReader:
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, enable_auto_commit=False,
            auto_offset_reset="earliest", **self.security.client_options(),
        )
        await self._consumer.start()
        self._consumer.assign(await partitions_of(self.bootstrap, self.topic, self.security))
        self._task = asyncio.create_task(self._read())
        return self

    async def __aenter__(self) -> TopicReader:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _read(self) -> None:
        assert self._consumer is not None
        async for message in self._consumer:
            self.messages.append(Received(
                topic=message.topic, partition=message.partition, offset=message.offset,
                key=message.key, value=message.value or b"",
                headers={key: value for key, value in message.headers},
                received_at=time.monotonic(),
            ))

    async def wait_for(
        self, done: Callable[[list[Received]], bool], timeout_s: float = 30.0
    ) -> list[Received]:
        deadline = time.monotonic() + timeout_s
        while not done(self.messages):
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{self.topic}: condition not met after {timeout_s}s "
                    f"({len(self.messages)} messages read)"
                )
            await asyncio.sleep(0.05)
        return self.messages

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._consumer is not None:
            await self._consumer.stop()


async def group_lag(bootstrap: str, group: str, topic: str,
                    security: KafkaSecurity = PLAINTEXT) -> int:
    """Messages of `topic` that consumer group `group` has not committed yet."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **security.client_options())
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, **security.client_options())
    await admin.start()
    await consumer.start()
    try:
        partitions = await partitions_of(bootstrap, topic, security)
        ends = await consumer.end_offsets(partitions)
        committed = await admin.list_consumer_group_offsets(group, partitions=partitions)
        return sum(
            end - (committed[tp].offset if tp in committed and committed[tp].offset >= 0 else 0)
            for tp, end in ends.items()
        )
    finally:
        await consumer.stop()
        await admin.close()


async def wait_caught_up(
    bootstrap: str, group: str, topics: Sequence[str], timeout_s: float = 60.0,
    security: KafkaSecurity = PLAINTEXT,
) -> None:
    """Wait until `group` has committed everything on `topics`: all of it is durable."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            lags = [await group_lag(bootstrap, group, topic, security) for topic in topics]
        except GroupCoordinatorNotAvailableError:
            # The group's coordinator is still being elected (a fresh broker or group).
            lags = [-1 for _ in topics]
        if not any(lags):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"group {group} still lags {dict(zip(topics, lags, strict=True))}")
        await asyncio.sleep(0.25)
