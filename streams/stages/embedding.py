"""Embedding records for the sink: started in the background by `prepare`, awaited by
`complete`; should the batch fail, each record is embedded alone and the ones that cannot be
are refused (dead-lettered), not the batch."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from processors.events.errors import Rejection
from processors.text.embedding import Vector, embedding_text
from schemas.records import Record
from streams.plumbing.failures import Attempts
from streams.plumbing.messages import InboundMessage
from streams.plumbing.runtime import Runtime


def start_embedding(runtime: Runtime, records: Sequence[Record]) -> asyncio.Task[Vector]:
    """Embed the records in the background, so that other work overlaps the model."""
    return asyncio.ensure_future(
        runtime.embed([embedding_text(record.title, record.text) for record in records],
                      role="passage"))


async def embedded(
    runtime: Runtime, attempts: Attempts, items: Sequence[tuple[InboundMessage, Record]],
    vectors: asyncio.Future[Vector],
) -> tuple[list[tuple[tuple[InboundMessage, Record], Vector]],
           list[tuple[InboundMessage, Rejection]]]:
    """The items with their vectors, from `vectors` (started in `prepare`); should that
    fail, each item is embedded on its own and those that cannot be are refused."""
    try:
        return list(zip(items, await vectors, strict=True)), []
    except Exception:
        pass
    done: list[tuple[tuple[InboundMessage, Record], Vector]] = []

    async def embed(part: Sequence[tuple[InboundMessage, Record]]) -> None:
        found = await runtime.embed([embedding_text(r.title, r.text) for _, r in part],
                                    role="passage")
        done.extend(zip(part, found, strict=True))

    result = await attempts.isolating(items, embed, what="embedding")
    return done, [(item[0], error.rejection) for item, error in result.failed]
