"""Agents over batches in two overlapping stages, acknowledged only once complete, and
restarted when their stages crash.

While `complete` stores batch k, `prepare` already works on batch k+1 (parsing, lookups,
starting the model). Completion is strictly in order, and a batch's offsets are acked only
after its `complete` returned, so a worker killed anywhere replays it.

Stages handle bad events and failing stores themselves (streams/plumbing/failures.py). An exception
they let out is a crash: the agent is reported down (`Health`), its unacknowledged batches are
run again by fresh stages, a few times with backoff, and if they still crash, their events
are dead-lettered as `internal_error` (replayable once the bug is fixed) and acked. Then the
agent goes on consuming. Nothing taken from the stream is left unacknowledged, which would
block the partition's commits for good.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, cast

import faust

from processors.events.errors import Unexpected
from streams.plumbing.failures import RetryPolicy
from streams.plumbing.health import Health
from streams.plumbing.messages import InboundMessage

log = logging.getLogger(__name__)

P = TypeVar("P")
Event = faust.EventT[bytes]


class BatchStages(Protocol[P]):
    async def prepare(self, messages: Sequence[InboundMessage]) -> P: ...

    async def complete(self, prepared: P) -> None: ...


GiveUp = Callable[[Sequence[InboundMessage], Unexpected], Awaitable[None]]


def inbound(event: faust.EventT[Any]) -> InboundMessage:
    message = event.message
    headers = message.headers or ()
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    return InboundMessage(
        topic=message.topic,
        partition=message.partition,
        offset=message.offset,
        key=message.key,
        value=message.value,
        headers=tuple((key, value if isinstance(value, bytes) else value.encode())
                      for key, value in pairs),
        # Faust gives the broker's milliseconds as seconds.
        timestamp_ms=None if message.timestamp is None else round(message.timestamp * 1000),
    )


@dataclass(frozen=True)
class StagedAgent(Generic[P]):
    """How one agent runs: its name, fresh stages after a crash, what to do with events
    that crash every try, batch sizes and the retry policy."""

    name: str
    new_stages: Callable[[], BatchStages[P]]
    give_up: GiveUp
    health: Health
    batch_max: int
    within_s: float
    policy: RetryPolicy

    async def run(self, stream: faust.StreamT[bytes]) -> None:
        # Agents are handed a concrete Stream; only it has noack_take.
        assert isinstance(stream, faust.Stream)
        self.health.agent_started(self.name)
        pipeline = _Pipeline(self, stream)
        try:
            async for values in stream.noack_take(self.batch_max, self.within_s):
                # noack_take hands over the events themselves, so that they can be acked later.
                try:
                    await pipeline.take(cast(list[Event], list(values)))
                except Exception as exc:
                    await pipeline.recover(exc)
        finally:
            pipeline.stop()


class _Pipeline(Generic[P]):
    def __init__(self, agent: StagedAgent[P], stream: faust.Stream[bytes]) -> None:
        self._agent = agent
        self._stream = stream
        # Batches taken from the stream and not acked yet, oldest first.
        self._unacked: deque[list[Event]] = deque()
        self._start()

    def _start(self) -> None:
        self._stages = self._agent.new_stages()
        self._prepared: asyncio.Queue[tuple[list[Event], P]] = asyncio.Queue(maxsize=1)
        self._completer = asyncio.create_task(self._complete_in_order())

    def stop(self) -> None:
        self._completer.cancel()

    async def take(self, events: list[Event]) -> None:
        self._unacked.append(events)
        batch = await self._stages.prepare([inbound(event) for event in events])
        putting = asyncio.ensure_future(self._prepared.put((events, batch)))
        await asyncio.wait({putting, self._completer}, return_when=asyncio.FIRST_COMPLETED)
        if self._completer.done():
            putting.cancel()
            self._completer.result()  # raises the completing stage's crash

    async def _complete_in_order(self) -> None:
        while True:
            events, batch = await self._prepared.get()
            await self._stages.complete(batch)
            await self._ack(events)

    async def _ack(self, events: list[Event]) -> None:
        for event in events:
            await self._stream.ack(event)
        if self._unacked and self._unacked[0] is events:
            self._unacked.popleft()
        self._agent.health.batch_completed(self._agent.name)

    async def recover(self, crash: Exception) -> None:
        """Run the unacked batches again with fresh stages, one at a time; dead-letter the
        events of a batch that keeps crashing; then resume with fresh stages."""
        agent = self._agent
        self._completer.cancel()
        await asyncio.gather(self._completer, return_exceptions=True)
        self._crashed(crash, len(self._unacked[0]) if self._unacked else 0)
        delay = agent.policy.first_delay_s
        while self._unacked:
            events = self._unacked[0]
            messages = [inbound(event) for event in events]
            for _ in range(agent.policy.unexpected_attempts):
                await asyncio.sleep(delay)
                delay = min(delay * 2, agent.policy.max_delay_s)
                try:
                    stages = agent.new_stages()
                    await stages.complete(await stages.prepare(messages))
                    break
                except Exception as exc:
                    crash = exc
                    self._crashed(crash, len(events))
            else:
                await agent.give_up(messages, Unexpected.of(crash))
            await self._ack(events)
        self._start()

    def _crashed(self, crash: Exception, batch_size: int) -> None:
        error = Unexpected.of(crash)
        self._agent.health.agent_crashed(self._agent.name, error.detail)
        log.error("agent %s crashed on a batch of %d: %s", self._agent.name, batch_size,
                  error.detail, exc_info=crash)
