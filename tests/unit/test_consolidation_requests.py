"""The consolidation trigger stage (streams/stages/consolidation/requests.py) on in-memory stores:
a due namespace is asked once per basis, a request the broker never took is sent again with
its id, and the counts view shows what the trigger sees."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime

from memstream_client.ids import consolidate_request_id
from processors.consolidation.trigger import window_start
from schemas.topics import MEMORY_CONSOLIDATE
from stores.consolidations import CountWindow
from streams.api.operations.consolidation import consolidation_counts
from streams.plumbing.failures import RetryPolicy
from streams.plumbing.messages import Outbound
from streams.plumbing.metrics import Metrics
from streams.plumbing.runtime import Runtime
from streams.stages.consolidation.requests import ConsolidationTrigger
from tests.unit.store_fakes import InMemoryConsolidations, InMemoryStores

FAST = RetryPolicy(first_delay_s=0.001, max_delay_s=0.002, unexpected_attempts=2)


class Broker:
    def __init__(self) -> None:
        self.sent: list[Outbound] = []
        # While down, every produce fails as an unreachable broker would.
        self.down = False

    async def produce(self, messages: Sequence[Outbound]) -> None:
        if self.down:
            raise RuntimeError("broker unreachable")
        self.sent += messages

    async def event_ids_since(self, since_epoch_s: float) -> set[str]:
        return set()

    def requests(self) -> list[tuple[str, str, int]]:
        bodies = [json.loads(message.value) for message in self.sent]
        assert {message.topic for message in self.sent} <= {MEMORY_CONSOLIDATE}
        return [(b["namespace"], b["event_id"], b["payload"]["new_memories"]) for b in bodies]


def runtime(consolidations: InMemoryConsolidations, broker: Broker) -> Runtime:
    return Runtime(stores=InMemoryStores(consolidations=consolidations),
                   embedder=None,  # type: ignore[arg-type]
                   metrics=Metrics(), producer=broker, announcements=broker,
                   max_event_bytes=1024, retry_policy=FAST)


def today_basis() -> str:
    return f"day:{datetime.now(UTC).date().isoformat()}"


async def test_a_due_namespace_is_asked_once_and_one_with_too_few_memories_not_at_all() -> None:
    consolidations, broker = InMemoryConsolidations(), Broker()
    consolidations.new_since_report = {"due": 12, "quiet": 9}
    live = runtime(consolidations, broker)
    await ConsolidationTrigger(live).request_due(["quiet", "due", "due"],
                                                 live.attempts("memory.events"))
    request_id = consolidate_request_id("due", today_basis())
    assert broker.requests() == [("due", request_id, 12)]
    claimed = consolidations.requests[("due", today_basis())]
    assert (claimed.request_id, claimed.new_memories) == (request_id, 12)
    assert claimed.sent_at is not None
    assert [ns for ns, _ in consolidations.requests] == ["due"]


async def test_a_namespace_asked_today_costs_no_store_read_on_the_next_batch() -> None:
    consolidations, broker = InMemoryConsolidations(), Broker()
    consolidations.new_since_report = {"due": 10}
    live = runtime(consolidations, broker)
    trigger = ConsolidationTrigger(live)
    await trigger.request_due(["due"], live.attempts("memory.events"))
    reads = consolidations.fact_reads
    consolidations.new_since_report["due"] = 40
    await trigger.request_due(["due"], live.attempts("memory.events"))
    assert consolidations.fact_reads == reads
    assert len(broker.requests()) == 1


async def test_another_worker_finds_the_request_claimed_and_sent_and_sends_nothing() -> None:
    consolidations, broker = InMemoryConsolidations(), Broker()
    consolidations.new_since_report = {"due": 10}
    first, second = runtime(consolidations, broker), runtime(consolidations, broker)
    await ConsolidationTrigger(first).request_due(["due"], first.attempts("memory.events"))
    await ConsolidationTrigger(second).request_due(["due"], second.attempts("memory.events"))
    assert len(broker.requests()) == 1


async def test_a_claimed_request_the_broker_never_took_is_sent_again_with_its_id() -> None:
    consolidations, broker = InMemoryConsolidations(), Broker()
    consolidations.new_since_report = {"due": 10}
    live = runtime(consolidations, broker)
    trigger = ConsolidationTrigger(live)
    broker.down = True
    await trigger.request_due(["due"], live.attempts("memory.events"))  # logged, not raised
    assert consolidations.requests[("due", today_basis())].sent_at is None
    broker.down = False
    consolidations.new_since_report["due"] = 11
    await trigger.request_due(["due"], live.attempts("memory.events"))
    assert broker.requests() == [("due", consolidate_request_id("due", today_basis()), 11)]
    assert consolidations.requests[("due", today_basis())].sent_at is not None


async def test_a_report_today_stops_the_request() -> None:
    consolidations, broker = InMemoryConsolidations(), Broker()
    consolidations.new_since_report = {"due": 50}
    consolidations.reports_today = {"due": 1}
    live = runtime(consolidations, broker)
    await ConsolidationTrigger(live).request_due(["due"], live.attempts("memory.events"))
    assert broker.requests() == [] and consolidations.requests == {}


async def test_the_counts_view_shows_the_current_window_and_the_last_request() -> None:
    consolidations, broker = InMemoryConsolidations(), Broker()
    live = runtime(consolidations, broker)
    window = live.trigger_rules.window
    current = window_start(datetime.now(UTC), window)
    consolidations.windows = {"ns": [CountWindow(current - window, 4), CountWindow(current, 3)]}
    consolidations.new_since_report = {"ns": 7}
    quiet = await consolidation_counts(live, "ns")
    assert (quiet.current_window.start, quiet.current_window.memories) == (current, 3)
    assert [w.window_start for w in quiet.windows] == [current, current - window]
    assert (quiet.skip_reason, quiet.last_request) == ("too_few_new_memories", None)

    consolidations.new_since_report = {"ns": 10}
    await ConsolidationTrigger(live).request_due(["ns"], live.attempts("memory.events"))
    due = await consolidation_counts(live, "ns")
    assert due.skip_reason is None
    assert due.last_request is not None
    assert due.last_request.request_id == consolidate_request_id("ns", today_basis())
