"""The dead-letter stage (streams/stages/dead_letter_log.py) on an in-memory store: each dead
letter kept once, counted by outcome, and one Postgres refuses left on its topic."""

from __future__ import annotations

from collections.abc import Sequence

from processors.events.dead_letters import DeadLetterEntry
from processors.events.errors import Rejection, Unexpected
from stores.dead_letters import DeadLetterFilter, DeadLetterPosition
from streams.plumbing.dead_letters import dead_letter
from streams.plumbing.failures import RetryPolicy
from streams.plumbing.messages import InboundMessage
from streams.plumbing.metrics import Metrics
from streams.plumbing.runtime import Runtime
from streams.stages.dead_letter_log import DeadLetterLog, leave_on_topic
from tests.unit.store_fakes import InMemoryStores

FAST = RetryPolicy(first_delay_s=0.001, max_delay_s=0.002, unexpected_attempts=2)
DLQ = "memory.events.dlq"


class InMemoryDeadLetters:
    def __init__(self, refused_keys: frozenset[str] = frozenset()) -> None:
        self.kept: dict[str, DeadLetterEntry] = {}
        # Dead letters of these keys are refused as Postgres refuses bad data.
        self._refused_keys = refused_keys

    async def record_dead_letters(self, entries: Sequence[DeadLetterEntry]) -> set[str]:
        if any(entry.key in self._refused_keys for entry in entries):
            raise UnicodeEncodeError("utf-8", "x", 0, 1, "refused")
        # As ON CONFLICT DO NOTHING: the first of an id wins, in a batch too.
        new = {e.dead_letter_id for e in entries if e.dead_letter_id not in self.kept}
        for entry in entries:
            self.kept.setdefault(entry.dead_letter_id, entry)
        return new

    async def dead_letters(self, wanted: DeadLetterFilter, before: DeadLetterPosition | None,
                           limit: int) -> list[DeadLetterEntry]:
        raise AssertionError("the stage only writes")

    async def dead_letter_counts(self, wanted: DeadLetterFilter) -> dict[str, int]:
        raise AssertionError("the stage only writes")

    async def dead_letter(self, dead_letter_id: str) -> DeadLetterEntry | None:
        raise AssertionError("the stage only writes")


def runtime_of(store: InMemoryDeadLetters) -> Runtime:
    return Runtime(stores=InMemoryStores(dead_letters=store), embedder=None,  # type: ignore[arg-type]
                   metrics=Metrics(), producer=None, announcements=None,  # type: ignore[arg-type]
                   max_event_bytes=1024, retry_policy=FAST)


def read_back(source_offset: int, dlq_offset: int, key: bytes = b"team-a") -> InboundMessage:
    """The dead letter of the event at memory.events/0/`source_offset`, as read from the DLQ."""
    letter = dead_letter(InboundMessage("memory.events", 0, source_offset, key, b"{broken"),
                         Rejection("malformed_json", "Expecting value"))
    return InboundMessage(letter.topic, 0, dlq_offset, letter.key, letter.value,
                          letter.headers, timestamp_ms=1_777_000_000_000 + dlq_offset)


def counted(runtime: Runtime, outcome: str) -> float:
    value = runtime.metrics.registry.get_sample_value(
        "memstream_dead_letters_read_total", {"topic": DLQ, "outcome": outcome})
    assert value is not None, "every outcome is exported from the start"
    return value


async def test_each_dead_letter_is_kept_once_however_often_it_is_read() -> None:
    store = InMemoryDeadLetters()
    runtime = runtime_of(store)
    stage = DeadLetterLog(runtime, DLQ)
    # Event 10 dead-lettered twice (a worker killed before acknowledging it), in one batch.
    await stage.complete(await stage.prepare([read_back(10, 0), read_back(10, 1),
                                              read_back(11, 2)]))
    assert len(store.kept) == 2
    assert (counted(runtime, "stored"), counted(runtime, "duplicate")) == (2, 1)
    # The DLQ consumed again.
    await stage.complete(await stage.prepare([read_back(10, 0), read_back(11, 2)]))
    assert len(store.kept) == 2
    assert (counted(runtime, "stored"), counted(runtime, "duplicate")) == (2, 3)
    (first, _) = sorted(store.kept.values(), key=lambda e: e.dlq_offset)
    assert (first.dlq_offset, first.source_offset, first.dead_lettered_at.timestamp()) == (
        0, 10, 1_777_000_000.0)


async def test_a_dead_letter_postgres_refuses_is_left_on_its_topic_and_the_rest_kept() -> None:
    store = InMemoryDeadLetters(refused_keys=frozenset({"bad-key"}))
    runtime = runtime_of(store)
    stage = DeadLetterLog(runtime, DLQ)
    await stage.complete(await stage.prepare([
        read_back(20, 3), read_back(21, 4, key=b"bad-key"),
        read_back(22, 5)]))
    assert sorted(e.source_offset for e in store.kept.values()) == [20, 22]
    assert (counted(runtime, "stored"), counted(runtime, "unrecorded")) == (2, 1)


async def test_dead_letters_that_crash_the_stage_are_counted_never_dead_lettered() -> None:
    runtime = runtime_of(InMemoryDeadLetters())
    await leave_on_topic(runtime)([read_back(30, 6), read_back(31, 7)],
                                  Unexpected("RuntimeError: a bug"))
    assert (counted(runtime, "stored"), counted(runtime, "unrecorded")) == (0, 2)
