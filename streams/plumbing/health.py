"""What `/healthz` knows beyond reachability: agents that crashed, partitions that stalled.

An agent is down from a crash (an exception its stages let out) until it completes a batch
again, or until it has gone `stall_after_s` without crashing again (it may simply have had
nothing to consume since its restart). A partition is stalled when it has lag and its
consumer group's committed offset has not moved for longer than `stall_after_s`: a poison
event, a store that stays down, or a stage that hangs all look like that from outside.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from streams.plumbing.metrics import Metrics


@dataclass(frozen=True)
class PartitionOffsets:
    committed: int
    end: int

    @property
    def lag(self) -> int:
        return max(0, self.end - self.committed)


@dataclass
class _Progress:
    committed: int
    since: float
    lag: int


@dataclass
class _AgentState:
    crashed_at: float | None = None
    error: str = ""


class Health:
    def __init__(self, metrics: Metrics, stall_after_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._metrics = metrics
        self._stall_after_s = stall_after_s
        self._clock = clock
        self._agents: dict[str, _AgentState] = {}
        self._partitions: dict[tuple[str, int], _Progress] = {}

    def agent_started(self, name: str) -> None:
        self._agents.setdefault(name, _AgentState())
        self._metrics.agent_crashes.labels(name)
        self._metrics.agent_up.labels(name).set(1)

    def agent_crashed(self, name: str, error: str) -> None:
        state = self._agents.setdefault(name, _AgentState())
        state.crashed_at, state.error = self._clock(), error
        self._metrics.agent_crashes.labels(name).inc()
        self._metrics.agent_up.labels(name).set(0)

    def batch_completed(self, name: str) -> None:
        state = self._agents.setdefault(name, _AgentState())
        if state.crashed_at is not None:
            self._recovered(name, state)

    def _recovered(self, name: str, state: _AgentState) -> None:
        state.crashed_at, state.error = None, ""
        self._metrics.agent_up.labels(name).set(1)

    def _refresh(self, now: float) -> None:
        """Bring the metrics up to `now`: crashes long past forgotten, stalls as they are."""
        for name, state in self._agents.items():
            if state.crashed_at is not None and now - state.crashed_at >= self._stall_after_s:
                self._recovered(name, state)
        for (topic, partition), progress in self._partitions.items():
            self._metrics.partition_stalled.labels(topic, str(partition)).set(
                int(self._stalled(progress, now)))

    def observe_partitions(self, offsets: Mapping[tuple[str, int], PartitionOffsets]) -> None:
        """The committed and end offsets of the partitions this worker owns, as read now;
        partitions no longer owned are forgotten."""
        now = self._clock()
        for gone in self._partitions.keys() - offsets.keys():
            del self._partitions[gone]
            self._metrics.partition_stalled.remove(gone[0], str(gone[1]))
        for key, seen in offsets.items():
            progress = self._partitions.get(key)
            if progress is None or progress.committed != seen.committed or seen.lag == 0:
                progress = _Progress(seen.committed, now, seen.lag)
                self._partitions[key] = progress
            progress.lag = seen.lag
        self._refresh(now)

    def idle(self) -> bool:
        """Whether every partition this worker owns was caught up when last measured."""
        return bool(self._partitions) and all(
            progress.lag == 0 for progress in self._partitions.values())

    def problems(self) -> dict[str, dict[str, str]]:
        """The agents that are down and the partitions that are stalled, with why; empty
        when healthy."""
        now = self._clock()
        self._refresh(now)
        agents = {
            name: f"crashed {now - state.crashed_at:.0f}s ago: {state.error}"
            for name, state in sorted(self._agents.items()) if state.crashed_at is not None
        }
        stalled = {
            f"{topic}/{partition}":
                f"lag {progress.lag}, no progress for {now - progress.since:.0f}s"
            for (topic, partition), progress in sorted(self._partitions.items())
            if self._stalled(progress, now)
        }
        return {key: value for key, value in (("agents", agents), ("stalled", stalled)) if value}

    def _stalled(self, progress: _Progress, now: float) -> bool:
        return progress.lag > 0 and now - progress.since > self._stall_after_s
