"""The failure policy: what is retried, what is given up, and which events are at fault."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import asyncpg
import pytest
from aiokafka.errors import KafkaConnectionError, KafkaTimeoutError, MessageSizeTooLargeError

from processors.events.errors import (
    BrokerRefused,
    BrokerUnavailable,
    MemstreamError,
    Rejected,
    StoreRefused,
    StoreUnavailable,
    Unavailable,
    Unexpected,
)
from streams.plumbing.failures import Attempts, RetryPolicy, classify
from streams.plumbing.metrics import Metrics

FAST = RetryPolicy(first_delay_s=0.001, max_delay_s=0.002, unexpected_attempts=3)


def postgres_error(sqlstate: str) -> asyncpg.PostgresError:
    error = asyncpg.PostgresError(f"sqlstate {sqlstate}")
    error.sqlstate = sqlstate  # type: ignore[attr-defined]
    return error


@pytest.mark.parametrize(
    ("exc", "kind", "reason"),
    [
        (asyncpg.exceptions.CharacterNotInRepertoireError("invalid byte sequence 0x00"),
         StoreRefused, "refused_by_store"),
        (asyncpg.exceptions.NumericValueOutOfRangeError("out of range"), StoreRefused,
         "refused_by_store"),
        (asyncpg.exceptions.ForeignKeyViolationError("fk"), StoreRefused, "refused_by_store"),
        (asyncpg.exceptions.ProgramLimitExceededError("index row too big"), StoreRefused,
         "refused_by_store"),
        (asyncpg.exceptions.SerializationError("serialize"), StoreUnavailable, None),
        (asyncpg.exceptions.DeadlockDetectedError("deadlock"), StoreUnavailable, None),
        (asyncpg.exceptions.TooManyConnectionsError("too many"), StoreUnavailable, None),
        (asyncpg.exceptions.AdminShutdownError("shutdown"), StoreUnavailable, None),
        (asyncpg.exceptions.QueryCanceledError("statement timeout"), StoreUnavailable, None),
        (asyncpg.exceptions.ConnectionDoesNotExistError("gone"), StoreUnavailable, None),
        (asyncpg.exceptions.InterfaceError("pool is closing"), StoreUnavailable, None),
        (UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"), StoreRefused,
         "refused_by_store"),
        (ConnectionRefusedError(111, "refused"), Unavailable, None),
        (FileNotFoundError(2, "No such file or directory"), Unavailable, None),
        (TimeoutError(), Unavailable, None),
        (KafkaConnectionError("broker down"), BrokerUnavailable, None),
        (KafkaTimeoutError(), BrokerUnavailable, None),
        (MessageSizeTooLargeError(), BrokerRefused, "refused_by_broker"),
        (postgres_error("42703"), Unexpected, "internal_error"),  # undefined column: a bug
        (KeyError("body"), Unexpected, "internal_error"),
    ],
)
def test_exceptions_are_classified(exc: Exception, kind: type[MemstreamError],
                                   reason: str | None) -> None:
    error = classify(exc)
    assert isinstance(error, kind)
    if reason is not None:
        assert error.rejection.reason == reason
    assert error.retriable == kind.retriable


def test_an_unexpected_error_says_what_and_where() -> None:
    try:
        {}["missing"]
    except KeyError as exc:
        detail = classify(exc).detail
    assert detail.startswith("KeyError: 'missing' (at test_failures.py:")
    assert "test_an_unexpected_error_says_what_and_where" in detail


def test_our_own_errors_pass_through() -> None:
    rejected = Rejected("invalid_text", "event_id holds U+0000")
    assert classify(rejected) is rejected


class Flaky:
    """A step that fails with `errors`, in turn, then succeeds."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


async def test_a_transient_failure_is_retried_until_it_passes() -> None:
    metrics = Metrics()
    step = Flaky(*(ConnectionRefusedError(111, "refused") for _ in range(20)))
    assert await Attempts("memory.events", metrics, FAST).until_done(step, what="x") == "done"
    assert step.calls == 21
    assert metrics.retries.labels("memory.events")._value.get() == 20


async def test_an_unexpected_failure_is_given_up_after_its_tries() -> None:
    metrics = Metrics()
    step = Flaky(*(KeyError("body") for _ in range(10)))
    with pytest.raises(Unexpected, match="KeyError"):
        await Attempts("memory.events", metrics, FAST).until_done(step, what="x")
    assert step.calls == 3
    assert metrics.unexpected_errors.labels("memory.events")._value.get() == 3


async def test_a_permanent_failure_is_not_retried() -> None:
    step = Flaky(asyncpg.exceptions.CharacterNotInRepertoireError("0x00"))
    with pytest.raises(StoreRefused):
        await Attempts("memory.events", Metrics(), FAST).until_done(step, what="x")
    assert step.calls == 1


async def test_cancellation_is_not_a_failure() -> None:
    async def step() -> None:
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await Attempts("memory.events", Metrics(), FAST).until_done(step, what="x")


class Store:
    """Refuses every batch holding a poisoned item, as Postgres refuses a whole statement."""

    def __init__(self, poisoned: set[int], failure: Exception | None = None) -> None:
        self.poisoned = poisoned
        self.failure = failure or asyncpg.exceptions.CharacterNotInRepertoireError("0x00")
        self.stored: list[int] = []
        self.calls = 0

    async def write(self, items: Sequence[int]) -> None:
        self.calls += 1
        if self.poisoned & set(items):
            raise self.failure
        self.stored.extend(items)


async def test_isolation_stores_the_others_in_order_and_names_the_ones_at_fault() -> None:
    store = Store({3, 9})
    result = await Attempts("memory.events", Metrics(), FAST).isolating(
        list(range(12)), store.write, what="storing")
    assert store.stored == [0, 1, 2, 4, 5, 6, 7, 8, 10, 11], "order within the batch is kept"
    assert result.done == store.stored
    assert [(item, error.rejection.reason) for item, error in result.failed] == [
        (3, "refused_by_store"), (9, "refused_by_store")]
    assert store.calls < 12, "halves, not one item at a time"


async def test_a_bug_that_fails_every_item_is_bounded_by_the_batch() -> None:
    store = Store(set(range(16)), failure=KeyError("body"))
    result = await Attempts("memory.events", Metrics(), FAST).isolating(
        list(range(16)), store.write, what="storing")
    assert result.done == []
    assert [item for item, _ in result.failed] == list(range(16))
    assert {error.rejection.reason for _, error in result.failed} == {"internal_error"}
    # 3 tries of the whole batch, then one try of each part: 3 + 30 calls, not 3 * 31.
    assert store.calls == 3 + 30


async def test_isolation_waits_out_an_outage_without_giving_anything_up() -> None:
    outage = Flaky(*(ConnectionRefusedError(111, "refused") for _ in range(5)))
    stored: list[int] = []

    async def write(items: Sequence[int]) -> None:
        await outage()
        stored.extend(items)

    result = await Attempts("memory.events", Metrics(), FAST).isolating(
        [1, 2, 3], write, what="storing")
    assert (result.done, result.failed, stored) == ([1, 2, 3], [], [1, 2, 3])
