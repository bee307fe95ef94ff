"""How a role's app is wired: its staged agents over topics, its timers, and the pages of its
HTTP face (streams/api/pages.py), each authenticated unless public."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

import faust
from aiokafka import TopicPartition
from aiokafka.errors import KafkaError

from processors.events.errors import Unexpected
from schemas.topics import (
    DEAD_LETTER_TOPICS,
    DOCUMENTS_EVENTS,
    MEMORY_CONSOLIDATE,
    MEMORY_EVENTS,
    PLANNING_EVENTS,
    RUNS_EVENTS,
    SESSIONS_EVENTS,
)
from stores.index.protocol import VectorIndex
from streams.api.auth import Authenticator
from streams.api.pages import Pages
from streams.api.status import wire_status
from streams.plumbing.batches import BatchStages, GiveUp, StagedAgent
from streams.plumbing.config import Settings
from streams.plumbing.consumer_lag import ConsumerLagProbe
from streams.plumbing.dead_letters import send_dead_letters
from streams.plumbing.health import Health
from streams.plumbing.messages import InboundMessage
from streams.plumbing.runtime import Runtime

log = logging.getLogger(__name__)

Role = Literal["ingest", "consolidator"]
# The topics each role consumes.
ROLE_TOPICS: dict[Role, tuple[str, ...]] = {
    "ingest": (MEMORY_EVENTS, RUNS_EVENTS, SESSIONS_EVENTS, DOCUMENTS_EVENTS, PLANNING_EVENTS,
               *DEAD_LETTER_TOPICS),
    "consolidator": (MEMORY_CONSOLIDATE,),
}


class Wiring:
    """Attaches agents, timers and pages to one role's app."""

    def __init__(self, app: faust.App, settings: Settings, runtime: Runtime, health: Health,
                 lag_probe: ConsumerLagProbe, role: Role) -> None:
        self.app = app
        self.pages = Pages(app, runtime.metrics,
                           Authenticator(runtime.stores.keys, enabled=settings.auth))
        self._settings = settings
        self._runtime = runtime
        self.health = health
        self._lag_probe = lag_probe
        self._role = role

    def agent(self, topic: str, name: str, new_stages: Callable[[], BatchStages[Any]],
              batch_max: int, give_up: GiveUp | None = None) -> None:
        """A staged agent on `topic` (streams/plumbing/batches.py): crashes restart it,
        events that crash every try are dead-lettered, or given to `give_up`."""
        runtime = self._runtime

        async def dead_letter(messages: Sequence[InboundMessage], error: Unexpected) -> None:
            await send_dead_letters(runtime, [(message, error.rejection)
                                              for message in messages])

        staged = StagedAgent(name, new_stages, give_up or dead_letter, self.health, batch_max,
                             self._settings.batch_within_s, runtime.retry_policy)
        topic_of_bytes = self.app.topic(topic, key_type=bytes, value_type=bytes,
                                         value_serializer="raw", key_serializer="raw")
        self.app.agent(topic_of_bytes, name=name)(staged.run)

    def every(self, interval_s: float, what: str, job: Callable[[], Awaitable[object]]) -> None:
        """Run `job` on a timer that survives its failures: a timer that raised would never
        run again, so a failure is logged and the next tick tries again."""

        async def tick() -> None:
            try:
                await job()
            except Exception as exc:
                log.warning("could not %s: %s", what, Unexpected.of(exc).detail)

        # Faust names a timer after its function, in its logs and its task list.
        tick.__name__ = f"every_{what.replace(' ', '_')}"
        self.app.timer(interval=interval_s)(tick)

    def common(self, index: VectorIndex | None) -> None:
        """What every role has: the lag and stall probe, /healthz and /metrics."""
        app, health = self.app, self.health
        consumed = ROLE_TOPICS[self._role]

        async def measure_consumer_lag() -> None:
            assigned = [TopicPartition(tp.topic, tp.partition)
                        for tp in app.consumer.assignment() if tp.topic in consumed]
            try:
                health.observe_partitions(await self._lag_probe.measure(assigned))
            except KafkaError as exc:
                # A metric must not take the worker down; the next tick tries again.
                log.warning("could not measure consumer lag: %s", exc)

        app.timer(interval=self._settings.lag_interval_s)(measure_consumer_lag)
        wire_status(self.pages, self._runtime, health, index, self._role)
