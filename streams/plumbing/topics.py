"""memstream's Kafka topics: read from infra/kafka/topics.json and created idempotently.

``infra/kafka/topics.json`` is the one place that declares the topics (name, partitions,
replication, topic configs). ``MEMSTREAM_PARTITIONS`` overrides the partition count of every
topic (tests use 1 or 2 to rebalance quickly). The worker creates what is missing at start;
``python -m streams.commands.topics`` does it by hand.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.client import AIOKafkaClient, CoordinationType
from aiokafka.errors import KafkaError, TopicAlreadyExistsError, for_code

from publisher.kafka_security import PLAINTEXT, KafkaSecurity, connection_failures_explained
from schemas.topics import TOPICS_FILE, TopicSpec, read_topic_specs
from streams.plumbing.config import local_kafka_address

log = logging.getLogger(__name__)

PARTITIONS_ENV = "MEMSTREAM_PARTITIONS"
BOOTSTRAP_ENV = "MEMSTREAM_KAFKA_BOOTSTRAP"


def _partitions_override() -> int | None:
    raw = os.environ.get(PARTITIONS_ENV, "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{PARTITIONS_ENV}={raw!r} is not an integer") from None
    if value < 1:
        raise ValueError(f"{PARTITIONS_ENV} must be >= 1, got {value}")
    return value


def load_topic_specs(path: Path | None = None) -> list[TopicSpec]:
    """The declared topics (default: infra/kafka/topics.json of this repo), with
    ``MEMSTREAM_PARTITIONS`` overriding the partitions of all topics."""
    return read_topic_specs(path or TOPICS_FILE, _partitions_override())


async def _wait_visible(
    admin: AIOKafkaAdminClient, names: Sequence[str], timeout: float = 15.0
) -> None:
    """Wait until the broker's metadata lists the topics with a leader for every partition."""
    if not names:
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    pending = set(names)
    while True:
        for topic in await admin.describe_topics(sorted(pending)):
            parts = topic.get("partitions") or []
            if topic.get("error_code") == 0 and parts and all(p["leader"] >= 0 for p in parts):
                pending.discard(topic["topic"])
        if not pending:
            return
        if loop.time() > deadline:
            raise TimeoutError(f"topics not visible after {timeout}s: {sorted(pending)}")
        await asyncio.sleep(0.1)


async def ensure_topics(bootstrap: str, specs: Sequence[TopicSpec],
                        security: KafkaSecurity = PLAINTEXT) -> list[str]:
    """Create the topics of ``specs`` that do not exist yet; return the names created.

    Idempotent: existing topics are left as they are (a partition count that differs from
    the spec is logged, not changed), and a topic created concurrently by someone else counts
    as existing. Returns once the created topics are visible in the broker's metadata.
    """
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="memstream-topics",
                                **security.client_options())
    with connection_failures_explained():
        await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [s for s in specs if s.name not in existing]
        present = [s for s in specs if s.name in existing]
        if present:
            for topic in await admin.describe_topics([s.name for s in present]):
                spec = next(s for s in present if s.name == topic["topic"])
                have = len(topic.get("partitions") or [])
                if have != spec.partitions:
                    log.warning(
                        "topic %s has %d partitions, the spec says %d (left unchanged)",
                        spec.name,
                        have,
                        spec.partitions,
                    )
        if not missing:
            return []
        response = await admin.create_topics(
            [
                NewTopic(
                    name=s.name,
                    num_partitions=s.partitions,
                    replication_factor=s.replication,
                    topic_configs=dict(s.config),
                )
                for s in missing
            ]
        )
        created: list[str] = []
        errors: list[str] = []
        for item in response.topic_errors:
            name, code = item[0], item[1]
            message = item[2] if len(item) > 2 else None
            if code == 0:
                created.append(name)
            elif code != TopicAlreadyExistsError.errno:
                errors.append(f"{name}: {for_code(code).__name__}: {message or ''}".rstrip(": "))
        if errors:
            raise RuntimeError("could not create topics: " + "; ".join(errors))
        await _wait_visible(admin, created)
        order = {s.name: i for i, s in enumerate(specs)}
        return sorted(created, key=lambda n: order.get(n, len(order)))
    finally:
        await admin.close()


async def partitions_of(bootstrap: str, topic: str,
                        security: KafkaSecurity = PLAINTEXT) -> list[TopicPartition]:
    """The partitions of `topic`, as the broker describes them now."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="memstream-topics",
                                **security.client_options())
    with connection_failures_explained():
        await admin.start()
    try:
        (description,) = await admin.describe_topics([topic])
    finally:
        await admin.close()
    if description["error_code"] != 0 or not description["partitions"]:
        raise LookupError(f"topic {topic} does not exist on {bootstrap}")
    return sorted(TopicPartition(topic, p["partition"]) for p in description["partitions"])


async def wait_for_group_coordinator(bootstrap: str, group: str,
                                     security: KafkaSecurity = PLAINTEXT,
                                     timeout: float = 30.0) -> None:
    """Wait until the broker names a coordinator for `group`.

    A new broker creates its offsets topic at the first lookup and has no coordinator until
    that topic has leaders; a consumer that joined meanwhile would log the broker's answer as
    an error on every first start. Asked here, the wait is quiet."""
    client = AIOKafkaClient(bootstrap_servers=bootstrap, client_id="memstream-topics",
                            **security.client_options())
    with connection_failures_explained():
        await client.bootstrap()
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                await client.coordinator_lookup(CoordinationType.GROUP, group)
                return
            except KafkaError as exc:
                if not exc.retriable or loop.time() > deadline:
                    raise
            await asyncio.sleep(0.1)
    finally:
        await client.close()


def default_bootstrap() -> str:
    """MEMSTREAM_KAFKA_BOOTSTRAP, else the address the local broker wrote for its clients."""
    address = os.environ.get(BOOTSTRAP_ENV, "").strip() or local_kafka_address(os.environ)
    if not address:
        raise RuntimeError(
            f"no Kafka bootstrap: set {BOOTSTRAP_ENV} or start the local broker "
            "(infra/kafka/broker.sh start writes var/kafka/bootstrap)"
        )
    return address

