"""What the optional LLM hook adds to the entities the rules found
(processors/knowledge/entities.py): on a timer, the live records whose current version it was
not asked about yet, a few at a time, the latest first; what it names and the record's text
writes is kept as mentions of origin `llm`, so that a reader can tell them from the rules'.
Nothing waits for it: the rules' entities are indexed with every record by the sink, and the
hook only adds to them."""

from __future__ import annotations

from processors.knowledge.entities import llm_mentions
from streams.plumbing.llm_hook import ChatEndpoint, entity_names
from streams.plumbing.runtime import Runtime

# Records asked about per tick: the hook answers in seconds, and the worker has other work.
PER_TICK = 8


class EntityEnricher:
    def __init__(self, runtime: Runtime, llm: ChatEndpoint) -> None:
        self._runtime = runtime
        self._llm = llm

    async def read_some(self) -> int:
        """Ask the hook about up to PER_TICK records; how many it answered for. A hook that
        cannot be reached ends the tick, and its records are asked again on the next; an
        answer of the wrong shape names nothing, and the record is not asked again."""
        entities = self._runtime.stores.entities
        answered = 0
        for record, version in await entities.unread_by_llm(PER_TICK):
            text = f"{record.title}\n{record.text}" if record.title else record.text
            named = await entity_names(self._llm, text, self._runtime.metrics)
            if named is None:
                break
            await entities.add_llm_mentions(record.namespace, record.record_id, version,
                                            llm_mentions(named))
            answered += 1
        return answered
