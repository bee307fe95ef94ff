"""What /healthz reports beyond reachability: crashed agents and stalled partitions."""

from __future__ import annotations

from streams.plumbing.health import Health, PartitionOffsets
from streams.plumbing.metrics import Metrics


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def gauge(metrics: Metrics, name: str, *labels: str) -> float:
    value: float = getattr(metrics, name).labels(*labels)._value.get()
    return value


def test_a_partition_with_lag_and_no_progress_stalls_and_recovers() -> None:
    clock, metrics = Clock(), Metrics()
    health = Health(metrics, stall_after_s=10, clock=clock)
    health.observe_partitions({("memory.events", 2): PartitionOffsets(100, 150)})
    clock.now += 9
    health.observe_partitions({("memory.events", 2): PartitionOffsets(100, 160)})
    assert health.problems() == {}, "not yet: 9 s without progress"
    clock.now += 2
    health.observe_partitions({("memory.events", 2): PartitionOffsets(100, 170)})
    assert health.problems() == {
        "stalled": {"memory.events/2": "lag 70, no progress for 11s"}}
    assert gauge(metrics, "partition_stalled", "memory.events", "2") == 1
    health.observe_partitions({("memory.events", 2): PartitionOffsets(101, 170)})
    assert health.problems() == {}
    assert gauge(metrics, "partition_stalled", "memory.events", "2") == 0


def test_a_partition_without_lag_is_never_stalled() -> None:
    clock = Clock()
    health = Health(Metrics(), stall_after_s=10, clock=clock)
    for _ in range(5):
        health.observe_partitions({("runs.events", 0): PartitionOffsets(42, 42)})
        clock.now += 100
    assert health.problems() == {}


def test_a_partition_no_longer_owned_is_forgotten() -> None:
    clock, metrics = Clock(), Metrics()
    health = Health(metrics, stall_after_s=1, clock=clock)
    health.observe_partitions({("memory.events", 1): PartitionOffsets(0, 5)})
    clock.now += 5
    health.observe_partitions({("memory.events", 1): PartitionOffsets(0, 5)})
    assert "stalled" in health.problems()
    health.observe_partitions({})
    assert health.problems() == {}
    assert metrics.registry.get_sample_value(
        "memstream_partition_stalled", {"topic": "memory.events", "partition": "1"}) is None


def test_a_crashed_agent_is_down_until_it_completes_a_batch() -> None:
    clock, metrics = Clock(), Metrics()
    health = Health(metrics, stall_after_s=30, clock=clock)
    health.agent_started("memory-writes")
    assert gauge(metrics, "agent_up", "memory-writes") == 1
    health.agent_crashed("memory-writes", "KeyError: 'body'")
    clock.now += 3
    assert health.problems() == {"agents": {"memory-writes": "crashed 3s ago: KeyError: 'body'"}}
    assert gauge(metrics, "agent_up", "memory-writes") == 0
    assert gauge(metrics, "agent_crashes", "memory-writes") == 1
    health.batch_completed("memory-writes")
    assert health.problems() == {}
    assert gauge(metrics, "agent_up", "memory-writes") == 1


def test_a_crash_long_past_with_nothing_to_consume_since_is_forgotten() -> None:
    clock = Clock()
    health = Health(Metrics(), stall_after_s=30, clock=clock)
    health.agent_started("run-ledger")
    health.agent_crashed("run-ledger", "boom")
    clock.now += 31
    assert health.problems() == {}
