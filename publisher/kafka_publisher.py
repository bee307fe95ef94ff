"""Publish memstream events from a Python orchestrator.

    async with Publisher("127.0.0.1:19092", producer="my-orchestrator") as publisher:
        record_id = await publisher.write_memory("team-a", "Deploys need the VPN up.")
        await publisher.run_started("team-a", run_id="run-42", intent="fix the flaky test")

Events are validated against the same models the worker uses before they leave, and keyed
as the topics expect (runs by run_id, memories by namespace). A cluster that wants SASL or
TLS takes `security=KafkaSecurity(...)` (publisher.kafka_security), or
`KafkaSecurity.from_env(os.environ)` to read the worker's MEMSTREAM_KAFKA_* variables.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from aiokafka import AIOKafkaProducer

from memstream_client.events import (
    EVENT_TYPES,
    ConsolidateRequest,
    DocumentEvent,
    MemoryEvent,
    PlanningEvent,
    RunEvent,
    SessionEvent,
)
from memstream_client.ids import memory_record_id
from publisher.kafka_security import PLAINTEXT, KafkaSecurity, connection_failures_explained
from schemas.topics import destination

AnyEvent = RunEvent | MemoryEvent | ConsolidateRequest | SessionEvent | DocumentEvent \
    | PlanningEvent


def validated(
    event_type: str,
    namespace: str,
    payload: dict[str, Any],
    *,
    producer: str,
    event_id: str | None = None,
    occurred_at: datetime | None = None,
) -> AnyEvent:
    """The event, validated; raises pydantic.ValidationError if invalid."""
    model = EVENT_TYPES[event_type]
    return model.model_validate(
        {
            "event_id": event_id or str(uuid.uuid4()),
            "type": event_type,
            "namespace": namespace,
            "occurred_at": occurred_at or datetime.now(UTC),
            "producer": producer,
            "payload": payload,
        }
    )


def envelope(
    event_type: str,
    namespace: str,
    payload: dict[str, Any],
    *,
    producer: str,
    event_id: str | None = None,
    occurred_at: datetime | None = None,
) -> bytes:
    """The JSON bytes of a validated event; raises pydantic.ValidationError if invalid."""
    event = validated(event_type, namespace, payload, producer=producer, event_id=event_id,
                      occurred_at=occurred_at)
    return event.model_dump_json(exclude_none=True).encode()


class Publisher:
    def __init__(self, bootstrap: str, *, producer: str,
                 security: KafkaSecurity = PLAINTEXT) -> None:
        self._producer_name = producer
        self._kafka = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all",
                                       **security.client_options())

    async def __aenter__(self) -> Publisher:
        with connection_failures_explained():
            await self._kafka.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self._kafka.stop()

    async def publish(
        self, event_type: str, namespace: str, payload: dict[str, Any], *,
        event_id: str | None = None,
    ) -> str:
        """Publish one event and wait for the broker's acknowledgement; return its event_id."""
        event = validated(event_type, namespace, payload, producer=self._producer_name,
                          event_id=event_id)
        topic, key = destination(event)
        await self._kafka.send_and_wait(
            topic, event.model_dump_json(exclude_none=True).encode(), key=key)
        return event.event_id

    async def write_memory(
        self, namespace: str, text: str, *, event_id: str | None = None, **fields: Any
    ) -> str:
        """Publish a memory.write; return the record id the memory will have if the worker
        stores it as a new record. A restatement is kept with the live memory it restates, a
        write not worth keeping is refused, and then no record of this id will exist: what
        became of it is read by its event id (`GET /v1/writes/{event_id}`, the SDK's
        `write_outcome`), which `event_id=` lets the caller choose."""
        event_id = await self.publish(
            "memory.write", namespace, {"text": text, **fields}, event_id=event_id
        )
        return memory_record_id(namespace, event_id)

    async def update_memory(
        self, namespace: str, record_id: str, *, expected_version: int,
        event_id: str | None = None, **fields: Any,
    ) -> str:
        """Publish a memory.update of the fields given (text, title, memory_type, tags,
        related_ids) against the version the caller saw; return its event_id, which is also
        the pending diff's id when the record is protected."""
        return await self.publish(
            "memory.update", namespace,
            {"record_id": record_id, "expected_version": expected_version, **fields},
            event_id=event_id)

    # Optional fields are given as None: the event is sent without them (see `envelope`).

    async def deprecate_memory(
        self, namespace: str, record_id: str, *, reason: str,
        expected_version: int | None = None, event_id: str | None = None,
    ) -> str:
        return await self.publish("memory.deprecate", namespace, {
            "record_id": record_id, "reason": reason, "expected_version": expected_version,
        }, event_id=event_id)

    async def review_memory(
        self, namespace: str, record_id: str | None, *, decision: str, reviewer: str,
        diff_id: str | None = None, block: dict[str, str] | None = None,
        note: str | None = None, event_id: str | None = None,
    ) -> str:
        """Approve or reject a draft memory, the pending diff `diff_id` of a record, or (with
        `block`: its agent_id and label, and no record_id) the pending diff of a block."""
        return await self.publish("memory.review", namespace, {
            "record_id": record_id, "block": block, "decision": decision,
            "reviewer": reviewer, "diff_id": diff_id, "note": note,
        }, event_id=event_id)

    async def restore_memory(
        self, namespace: str, record_id: str, *, version: int,
        expected_version: int | None = None, event_id: str | None = None,
    ) -> str:
        """Bring a memory back to the content of `version`, as its next version."""
        return await self.publish("memory.restore", namespace, {
            "record_id": record_id, "version": version, "expected_version": expected_version,
        }, event_id=event_id)

    async def edit_block(
        self, namespace: str, agent_id: str, label: str, *,
        set: dict[str, str | list[str]] | None = None,
        append: dict[str, list[str]] | None = None, strategy: str | None = None,
        expected_version: int | None = None, event_id: str | None = None,
    ) -> str:
        """Edit one of an agent's core memory blocks: `set` replaces fields, `append` adds
        items to list fields; return the event id."""
        return await self.publish("memory.block", namespace, {
            "agent_id": agent_id, "label": label, "set": set or {}, "append": append or {},
            "strategy": strategy, "expected_version": expected_version,
        }, event_id=event_id)

    async def rate_memories(
        self, namespace: str, agent_id: str, ratings: Mapping[str, bool], *,
        gap: str | None = None, gap_query: str | None = None, event_id: str | None = None,
    ) -> str:
        """Publish a memory.rate: `agent_id` judged each memory it was given useful or not
        (`{memory_id: useful}`, 1 to 50), and may name a `gap`, what it needed and memory
        did not hold (`gap_query`: what it searched for it); return the event id."""
        return await self.publish("memory.rate", namespace, {
            "agent_id": agent_id, "gap": gap, "gap_query": gap_query,
            "ratings": [{"memory_id": memory_id, "useful": useful}
                        for memory_id, useful in ratings.items()],
        }, event_id=event_id)

    async def change_scoring(
        self, namespace: str, changes: Mapping[str, int | float], changed_by: str, *,
        expected_version: int | None = None, event_id: str | None = None,
    ) -> str:
        """Publish a memory.scoring: set the namespace's adaptive scoring parameters named in
        `changes` (`{name: number}`, the others kept), by `changed_by`, on the version
        `expected_version` if given (a change of another is refused as stale); return the
        event id."""
        return await self.publish("memory.scoring", namespace, {
            "changes": dict(changes), "changed_by": changed_by,
            "expected_version": expected_version,
        }, event_id=event_id)

    async def request_consolidation(self, namespace: str, *, event_id: str | None = None) -> str:
        """Ask the workers to consolidate the namespace now, whatever the trigger rules say;
        return the request's event_id, which its maintenance report will carry."""
        return await self.publish("memory.consolidate", namespace, {"reason": "manual"},
                                  event_id=event_id)

    async def run_started(self, namespace: str, *, run_id: str, **fields: Any) -> str:
        return await self.publish("run.started", namespace, {"run_id": run_id, **fields})

    async def run_step(self, namespace: str, *, run_id: str, kind: str, **fields: Any) -> str:
        return await self.publish(
            "run.step", namespace, {"run_id": run_id, "kind": kind, **fields}
        )

    async def run_artifact(
        self, namespace: str, *, run_id: str, kind: str, ref: str, **fields: Any
    ) -> str:
        return await self.publish(
            "run.artifact", namespace, {"run_id": run_id, "kind": kind, "ref": ref, **fields}
        )

    async def run_finished(
        self, namespace: str, *, run_id: str, status: str, **fields: Any
    ) -> str:
        return await self.publish(
            "run.finished", namespace, {"run_id": run_id, "status": status, **fields}
        )
