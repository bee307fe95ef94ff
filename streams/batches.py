"""Agents over batches in two overlapping stages, acknowledged only once complete.

While `complete` stores batch k, `prepare` already works on batch k+1 (parsing, lookups,
starting the model). Completion is strictly in order, and a batch's offsets are acked only
after its `complete` returned, so a crash anywhere replays it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeVar, cast

import faust

from streams.messages import InboundMessage

P = TypeVar("P")


class BatchStages(Protocol[P]):
    async def prepare(self, messages: Sequence[InboundMessage]) -> P: ...

    async def complete(self, prepared: P) -> None: ...


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
    )


async def run_in_stages(
    stream: faust.StreamT[bytes], stages: BatchStages[P], *, batch_max: int, within_s: float
) -> None:
    # Agents are handed a concrete Stream; only it has noack_take.
    assert isinstance(stream, faust.Stream)
    prepared: asyncio.Queue[tuple[Sequence[faust.EventT[bytes]], P]] = asyncio.Queue(maxsize=1)

    async def complete_in_order() -> None:
        while True:
            events, batch = await prepared.get()
            await stages.complete(batch)
            for event in events:
                await stream.ack(event)

    completer = asyncio.create_task(complete_in_order())
    try:
        async for values in stream.noack_take(batch_max, within_s):
            # noack_take hands over the events themselves, so that they can be acked later.
            events = cast(Sequence[faust.EventT[bytes]], values)
            batch = await stages.prepare([inbound(event) for event in events])
            putting = asyncio.ensure_future(prepared.put((events, batch)))
            await asyncio.wait({putting, completer}, return_when=asyncio.FIRST_COMPLETED)
            if completer.done():
                # A batch that cannot complete stops the agent, unacknowledged: its events
                # are consumed again after the restart.
                putting.cancel()
                completer.result()
                raise RuntimeError("the completing stage of the agent stopped")
    finally:
        completer.cancel()
