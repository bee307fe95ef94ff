"""What the stream does when a step fails: classify the failure, retry what is transient,
isolate the events at fault, and never retry forever what will not pass.

`classify` maps the exceptions of the drivers (asyncpg, aiokafka, qdrant-client, httpx,
sockets) onto the taxonomy of processors/events/errors.py. `Attempts` runs a step under the policy:

- `Unavailable` (Postgres, the index or the broker cannot answer): retried with backoff for
  as long as it lasts; the partition waits and nothing is skipped.
- `Unexpected` (nobody classified it): retried `unexpected_attempts` times, then given up as
  `internal_error`.
- anything else is permanent: given up at once.

`Attempts.isolating` applies a batch step and, when it gives up, splits the batch in halves
(the earlier half first, so per-key order holds) down to the single items at fault.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import asyncpg
import httpx
from aiokafka.errors import (
    KafkaError,
    KafkaTimeoutError,
    KafkaUnavailableError,
    MessageSizeTooLargeError,
    NodeNotReadyError,
    ProducerClosed,
    RecordTooLargeError,
)
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from processors.events.errors import (
    BrokerRefused,
    BrokerUnavailable,
    IndexRefused,
    IndexUnavailable,
    MemstreamError,
    StoreRefused,
    StoreUnavailable,
    Unavailable,
    Unexpected,
)
from streams.plumbing.metrics import Metrics

log = logging.getLogger(__name__)

T = TypeVar("T")
I = TypeVar("I")  # noqa: E741  # an item of a batch

# SQLSTATE classes of failures that pass by themselves: connection (08), transaction
# rollback such as serialization failures and deadlocks (40), insufficient resources (53),
# operator intervention such as shutdowns and cancelled statements (57), system errors (58).
_TRANSIENT_SQLSTATE_CLASSES = frozenset({"08", "40", "53", "57", "58"})
# Data Postgres refuses: data exceptions (22), integrity constraints (23), limits such as an
# index row that is too large (54).
_REFUSED_SQLSTATE_CLASSES = frozenset({"22", "23", "54"})
_TRANSIENT_SQLSTATES = frozenset({"55P03", "55006"})  # lock not available, object in use
_BROKER_REFUSES = (MessageSizeTooLargeError, RecordTooLargeError)
_BROKER_AWAY = (KafkaTimeoutError, KafkaUnavailableError, NodeNotReadyError, ProducerClosed)


def classify(exc: BaseException) -> MemstreamError:
    """The taxonomy's view of an exception raised by a step."""
    if isinstance(exc, MemstreamError):
        return exc
    detail = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, asyncpg.PostgresError):
        sqlstate = str(getattr(exc, "sqlstate", "") or "")
        if sqlstate in _TRANSIENT_SQLSTATES or sqlstate[:2] in _TRANSIENT_SQLSTATE_CLASSES:
            return StoreUnavailable(detail)
        if sqlstate[:2] in _REFUSED_SQLSTATE_CLASSES:
            return StoreRefused(detail)
        return Unexpected.of(exc)
    if isinstance(exc, asyncpg.exceptions.DataError | UnicodeEncodeError):
        # asyncpg could not encode an argument: the data, not the server.
        return StoreRefused(detail)
    if isinstance(exc, asyncpg.InterfaceError):
        # "connection is closed", "pool is closing", "cannot perform operation: another
        # operation is in progress" after a lost connection.
        return StoreUnavailable(detail)
    if isinstance(exc, KafkaError):
        if isinstance(exc, _BROKER_REFUSES):
            return BrokerRefused(detail)
        if exc.retriable or isinstance(exc, _BROKER_AWAY):
            return BrokerUnavailable(detail)
        return Unexpected.of(exc)
    if isinstance(exc, UnexpectedResponse):
        status = exc.status_code or 0
        if status in (408, 429) or status >= 500:
            return IndexUnavailable(detail)
        if 400 <= status < 500:
            return IndexRefused(detail)
        return Unexpected.of(exc)
    if isinstance(exc, ResponseHandlingException | httpx.TransportError):
        return IndexUnavailable(detail)
    if isinstance(exc, OSError):
        # A socket of one of them: refused, reset, timed out, or a Unix socket whose file is
        # gone while its server restarts. Which one does not matter to the policy; the
        # detail says it. (Steps open no files but sockets.)
        return Unavailable(detail)
    return Unexpected.of(exc)


@dataclass(frozen=True)
class RetryPolicy:
    first_delay_s: float = 0.1
    max_delay_s: float = 5.0
    # Tries of a step that fails with an unexpected error, the first included.
    unexpected_attempts: int = 4


@dataclass(frozen=True)
class Isolated(Generic[I]):
    done: list[I]
    failed: list[tuple[I, MemstreamError]]


class Attempts:
    """Runs the steps of one topic's stage under the retry policy, counting what it does."""

    def __init__(self, topic: str, metrics: Metrics, policy: RetryPolicy) -> None:
        self._topic = topic
        self._metrics = metrics
        self._policy = policy

    async def until_done(self, step: Callable[[], Awaitable[T]], *, what: str,
                         unexpected_attempts: int | None = None) -> T:
        """Run `step` until it succeeds; raise its classified error once it will not (see
        the module docstring). A transient failure never ends the loop."""
        budget = self._policy.unexpected_attempts if unexpected_attempts is None \
            else unexpected_attempts
        delay = self._policy.first_delay_s
        unexpected = 0
        while True:
            try:
                return await step()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                error = classify(exc)
                if isinstance(error, Unexpected):
                    unexpected += 1
                    self._metrics.unexpected_errors.labels(self._topic).inc()
                    if unexpected >= budget:
                        log.error("%s failed for %s (%d tries): %s", what, self._topic,
                                  unexpected, error.detail, exc_info=exc)
                        raise error from exc
                elif not error.retriable:
                    raise error from exc
                log.warning("%s failed for %s; retrying in %.1fs: %s", what, self._topic,
                            delay, error.detail)
                self._metrics.retries.labels(self._topic).inc()
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._policy.max_delay_s)

    async def isolating(self, items: Sequence[I],
                        step: Callable[[Sequence[I]], Awaitable[None]], *,
                        what: str) -> Isolated[I]:
        """Apply `step` to all `items`; if it fails for good, to each half in turn, down to
        the single items at fault. Unexpected errors get the policy's tries on the whole
        batch and one try on each part, so that a bug that fails every item is bounded by
        the size of the batch, not multiplied by it."""
        result: Isolated[I] = Isolated([], [])
        if items:
            await self._isolate(list(items), step, what, self._policy.unexpected_attempts,
                                result)
        return result

    async def _isolate(self, items: list[I], step: Callable[[Sequence[I]], Awaitable[None]],
                       what: str, unexpected_attempts: int, result: Isolated[I]) -> None:
        try:
            await self.until_done(lambda: step(items), what=what,
                                  unexpected_attempts=unexpected_attempts)
        except MemstreamError as error:
            if len(items) == 1:
                result.failed.append((items[0], error))
                return
            middle = len(items) // 2
            await self._isolate(items[:middle], step, what, 1, result)
            await self._isolate(items[middle:], step, what, 1, result)
            return
        result.done.extend(items)
