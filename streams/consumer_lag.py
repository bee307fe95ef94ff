"""How far the worker's consumer group is behind on the partitions this worker owns.

Lag per partition is the partition's end offset minus the group's committed offset (all of it
when nothing is committed yet), read from the broker every few seconds. Only the partitions
assigned to this worker are reported, so that summing over workers counts each partition once.
"""

from __future__ import annotations

from collections.abc import Iterable

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from streams.metrics import Metrics


class ConsumerLagProbe:
    def __init__(self, bootstrap: str, group: str, metrics: Metrics) -> None:
        self._bootstrap = bootstrap
        self._group = group
        self._metrics = metrics
        self._admin: AIOKafkaAdminClient | None = None
        self._offsets: AIOKafkaConsumer | None = None
        self._reported: set[TopicPartition] = set()

    async def measure(self, assigned: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Measure and export the lag of the `assigned` partitions; partitions that are no
        longer assigned stop being exported."""
        partitions = sorted(set(assigned))
        admin, offsets = await self._clients()
        lags: dict[TopicPartition, int] = {}
        if partitions:
            ends = await offsets.end_offsets(partitions)
            committed = await admin.list_consumer_group_offsets(self._group,
                                                                partitions=partitions)
            for partition in partitions:
                done = committed.get(partition)
                start = done.offset if done is not None and done.offset >= 0 else 0
                lags[partition] = max(0, ends[partition] - start)
        gauge = self._metrics.consumer_lag
        for gone in self._reported - lags.keys():
            gauge.remove(gone.topic, str(gone.partition))
        for partition, lag in lags.items():
            gauge.labels(partition.topic, str(partition.partition)).set(lag)
        self._reported = set(lags)
        return lags

    async def _clients(self) -> tuple[AIOKafkaAdminClient, AIOKafkaConsumer]:
        if self._admin is None or self._offsets is None:
            admin = AIOKafkaAdminClient(bootstrap_servers=self._bootstrap,
                                        client_id="memstream-lag")
            offsets = AIOKafkaConsumer(bootstrap_servers=self._bootstrap,
                                       client_id="memstream-lag", enable_auto_commit=False)
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
