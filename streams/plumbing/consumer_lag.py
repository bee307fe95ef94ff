"""How far the worker's consumer group is behind on the partitions this worker owns.

Lag per partition is the partition's end offset minus the group's committed offset (all of it
when nothing is committed yet), read from the broker every few seconds. Only the partitions
assigned to this worker are reported, so that summing over workers counts each partition once.
"""

from __future__ import annotations

from collections.abc import Iterable

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from publisher.kafka_security import KafkaSecurity
from streams.plumbing.health import PartitionOffsets
from streams.plumbing.metrics import Metrics


class ConsumerLagProbe:
    def __init__(self, bootstrap: str, group: str, metrics: Metrics,
                 security: KafkaSecurity) -> None:
        self._bootstrap = bootstrap
        self._security = security
        self._group = group
        self._metrics = metrics
        self._admin: AIOKafkaAdminClient | None = None
        self._offsets: AIOKafkaConsumer | None = None
        self._reported: set[tuple[str, int]] = set()

    async def measure(
        self, assigned: Iterable[TopicPartition]
    ) -> dict[tuple[str, int], PartitionOffsets]:
        """Measure and export the lag of the `assigned` partitions, and return their
        committed and end offsets; partitions that are no longer assigned stop being
        exported."""
        partitions = sorted(set(assigned))
        admin, offsets = await self._clients()
        found: dict[tuple[str, int], PartitionOffsets] = {}
        if partitions:
            ends = await offsets.end_offsets(partitions)
            committed = await admin.list_consumer_group_offsets(self._group,
                                                                partitions=partitions)
            for partition in partitions:
                done = committed.get(partition)
                start = done.offset if done is not None and done.offset >= 0 else 0
                found[(partition.topic, partition.partition)] = PartitionOffsets(
                    start, ends[partition])
        gauge = self._metrics.consumer_lag
        for topic, number in self._reported - found.keys():
            gauge.remove(topic, str(number))
        for (topic, number), seen in found.items():
            gauge.labels(topic, str(number)).set(seen.lag)
        self._reported = set(found)
        return found

    async def _clients(self) -> tuple[AIOKafkaAdminClient, AIOKafkaConsumer]:
        if self._admin is None or self._offsets is None:
            admin = AIOKafkaAdminClient(bootstrap_servers=self._bootstrap,
                                        client_id="memstream-lag",
                                        **self._security.client_options())
            offsets = AIOKafkaConsumer(bootstrap_servers=self._bootstrap,
                                       client_id="memstream-lag", enable_auto_commit=False,
                                       **self._security.client_options())
            await admin.start()
            await offsets.start()
            self._admin, self._offsets = admin, offsets
        return self._admin, self._offsets

    async def close(self) -> None:
        if self._offsets is not None:
            await self._offsets.stop()
        if self._admin is not None:
            await self._admin.close()
        self._admin = self._offsets = None
