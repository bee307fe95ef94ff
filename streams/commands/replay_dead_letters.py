"""Replay dead letters: republish them to the topic they came from, once their cause is fixed
(the redrive of Kafka Connect and SQS).

    python -m streams.commands.replay_dead_letters --topic memory.events.dlq [--reason R ...]
        [--since T] [--dry-run] [--json] [--bootstrap host:port]

Reads the dead-letter topic from its beginning to its end as it is when the command starts,
without a consumer group (it commits nothing and always ends), and republishes each selected
dead letter to the DLQ's source topic (memory.events for memory.events.dlq) with its original
key and bytes and the header `dlq.replay.of: <dlq>/<partition>/<offset>`, which traces the
redrive. `--reason` (repeatable) keeps the dead letters of these reasons; `--since` those
dead-lettered at or after an ISO 8601 time with an offset (2025-05-01T12:00Z) or a time ago
(30m, 2h, 1d). `--dry-run` reads and reports and publishes nothing. The report is a table per
dead-letter reason (found, replayed, skipped); `--json` prints it as JSON for scripts, with
the coordinates of the dead letters replayed and skipped. The bootstrap address defaults to
MEMSTREAM_KAFKA_BOOTSTRAP, else the local broker's, and the connection's security comes from
MEMSTREAM_KAFKA_SECURITY_PROTOCOL and its companions (as for python -m streams.commands.topics).

Skipped, and counted as such: a dead letter cut to fit the DLQ (`dlq.truncated: true`), whose
bytes are no longer the event, and one whose `dlq.source.topic` names another topic.

Replaying is safe to repeat, even after a run that failed halfway: the workers' sinks are
idempotent by event_id (run events are keyed by it, a memory's record id is derived from it),
so an event replayed twice, or stored meanwhile, is stored once. A replayed event that fails
again is dead-lettered again, as a new dead letter: `--since` keeps the next replay to those.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import sys
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, get_args

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from processors.events.errors import DeadLetterReason
from publisher.kafka_security import PLAINTEXT, KafkaSecurity
from schemas.topics import source_of_dead_letters
from streams.plumbing.dead_letters import (
    REASON_HEADER,
    REPLAY_COMMAND,
    REPLAY_HEADER,
    SOURCE_TOPIC_HEADER,
    TRUNCATED_HEADER,
)
from streams.plumbing.topics import BOOTSTRAP_ENV, default_bootstrap, partitions_of

CLIENT_ID = "memstream-replay-dead-letters"

REASONS: tuple[str, ...] = get_args(DeadLetterReason)
TRUNCATED = "truncated"
OTHER_SOURCE = "other_source"
SKIP_CAUSES = {TRUNCATED: "cut to fit the DLQ", OTHER_SOURCE: "from another source topic"}

# No message and no partition finished for this long: the broker is gone, not slow.
READ_STALL_S = 30.0
_TIME_AGO = re.compile(r"(\d+)([smhd])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """An ISO 8601 time with an offset or Z, or `now` minus a duration such as 30m, 2h, 1d."""
    ago = _TIME_AGO.fullmatch(text.strip())
    if ago:
        return (now or datetime.now(UTC)) - timedelta(**{_UNITS[ago[2]]: int(ago[1])})
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{text!r} is neither an ISO 8601 time nor a duration such as "
                         "30m, 2h, 1d") from None
    if moment.tzinfo is None:
        # A time without an offset means a different moment on every machine.
        raise ValueError(f"{text!r} needs an offset or Z")
    return moment


def _since_argument(text: str) -> datetime:
    try:
        return parse_since(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


@dataclass(frozen=True)
class DeadLetter:
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes
    headers: dict[str, bytes]

    @classmethod
    def of(cls, message: Any) -> DeadLetter:
        """From an aiokafka ConsumerRecord."""
        return cls(message.topic, message.partition, message.offset, message.timestamp,
                   message.key, message.value or b"", dict(message.headers or ()))

    @property
    def coordinates(self) -> str:
        return f"{self.topic}/{self.partition}/{self.offset}"

    def header(self, name: str) -> str | None:
        raw = self.headers.get(name)
        return None if raw is None else raw.decode("utf-8", "replace")

    @property
    def reason(self) -> str:
        return self.header(REASON_HEADER) or "unknown"


@dataclass(frozen=True)
class Selection:
    """Which dead letters to replay: of these reasons (all when empty), since that time."""

    reasons: frozenset[str] = frozenset()
    since: datetime | None = None

    @property
    def since_ms(self) -> int | None:
        return None if self.since is None else int(self.since.timestamp() * 1000)

    def wants(self, letter: DeadLetter) -> bool:
        if self.reasons and letter.reason not in self.reasons:
            return False
        since_ms = self.since_ms
        return since_ms is None or letter.timestamp_ms >= since_ms


def skip_cause(letter: DeadLetter, source: str) -> str | None:
    """Why `letter` cannot be republished to `source` as the event it was, if it cannot."""
    named_source = letter.header(SOURCE_TOPIC_HEADER)
    if named_source is not None and named_source != source:
        return OTHER_SOURCE
    if letter.header(TRUNCATED_HEADER) == "true":
        return TRUNCATED
    return None


@dataclass
class ReplayReport:
    dlq: str
    target: str
    dry_run: bool
    read: int = 0
    found: Counter[str] = field(default_factory=Counter)
    replayed: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    skip_causes: Counter[str] = field(default_factory=Counter)
    replayed_letters: list[str] = field(default_factory=list)
    skipped_letters: list[tuple[str, str]] = field(default_factory=list)

    def count(self, letter: DeadLetter, cause: str | None) -> None:
        self.found[letter.reason] += 1
        if cause is None:
            self.replayed[letter.reason] += 1
            self.replayed_letters.append(letter.coordinates)
        else:
            self.skipped[letter.reason] += 1
            self.skip_causes[cause] += 1
            self.skipped_letters.append((letter.coordinates, cause))

    def as_json(self) -> dict[str, Any]:
        return {
            "dlq": self.dlq,
            "target": self.target,
            "dry_run": self.dry_run,
            "read": self.read,
            "found": self.found.total(),
            "replayed": self.replayed.total(),
            "skipped": self.skipped.total(),
            "by_reason": {reason: {"found": self.found[reason],
                                   "replayed": self.replayed[reason],
                                   "skipped": self.skipped[reason]}
                          for reason in sorted(self.found)},
            "skip_causes": dict(sorted(self.skip_causes.items())),
            "replayed_dead_letters": self.replayed_letters,
            "skipped_dead_letters": [{"dead_letter": coordinates, "cause": cause}
                                     for coordinates, cause in self.skipped_letters],
        }

    def table(self) -> str:
        replayed = "would replay" if self.dry_run else "replayed"
        width = max([len("reason"), len("total"), *map(len, self.found)])
        row = f"{{:<{width}}}  {{:>5}}  {{:>{len(replayed)}}}  {{:>7}}"
        lines = [f"{self.dlq} -> {self.target}: {self.read} dead letters read, "
                 f"{self.found.total()} selected",
                 row.format("reason", "found", replayed, "skipped")]
        lines += [row.format(reason, self.found[reason], self.replayed[reason],
                             self.skipped[reason]) for reason in sorted(self.found)]
        lines.append(row.format("total", self.found.total(), self.replayed.total(),
                                self.skipped.total()))
        if self.skip_causes:
            lines.append("skipped: " + ", ".join(
                f"{count} {SKIP_CAUSES.get(cause, cause)} ({cause})"
                for cause, count in sorted(self.skip_causes.items())))
        if self.dry_run:
            lines.append("dry run: nothing published")
        return "\n".join(lines)


async def read_dead_letters(consumer: AIOKafkaConsumer, partitions: Sequence[TopicPartition],
                            since_ms: int | None) -> AsyncIterator[DeadLetter]:
    """The messages of `partitions` up to their ends as they are now, from the first one at or
    after `since_ms` (the beginning when None); later ones, such as a replay dead-lettered
    again while this runs, are left for the next run, so that the reading ends."""
    consumer.assign(list(partitions))
    ends = await consumer.end_offsets(list(partitions))
    if since_ms is None:
        starts = await consumer.beginning_offsets(list(partitions))
    else:
        # Kafka's time index: every message before the offset found is older than since_ms.
        found = await consumer.offsets_for_times({tp: since_ms for tp in partitions})
        starts = {tp: ends[tp] if at is None else at.offset for tp, at in found.items()}
    pending: set[TopicPartition] = set()
    for tp in partitions:
        if starts[tp] < ends[tp]:
            consumer.seek(tp, starts[tp])
            pending.add(tp)
        else:
            consumer.pause(tp)
    loop = asyncio.get_running_loop()
    progress_at = loop.time()
    while pending:
        batches = await consumer.getmany(*pending, timeout_ms=1000)
        for tp, messages in batches.items():
            for message in messages:
                if message.offset < ends[tp]:
                    yield DeadLetter.of(message)
        finished = {tp for tp in pending if await consumer.position(tp) >= ends[tp]}
        for tp in finished:
            consumer.pause(tp)
        pending -= finished
        if batches or finished:
            progress_at = loop.time()
        elif loop.time() - progress_at > READ_STALL_S:
            raise TimeoutError(f"{len(pending)} partitions of {partitions[0].topic} unread "
                               f"after {READ_STALL_S:.0f}s without progress")


async def replay(bootstrap: str, dlq: str, selection: Selection, dry_run: bool,
                 security: KafkaSecurity = PLAINTEXT) -> ReplayReport:
    """Republish the dead letters of `dlq` that `selection` wants to their source topic;
    with `dry_run`, only count them. Returns once the broker acknowledged every one."""
    source = source_of_dead_letters(dlq)
    report = ReplayReport(dlq, source, dry_run)
    partitions = await partitions_of(bootstrap, dlq, security)
    async with AsyncExitStack() as clients:
        consumer = await clients.enter_async_context(AIOKafkaConsumer(
            bootstrap_servers=bootstrap, client_id=CLIENT_ID, group_id=None,
            enable_auto_commit=False, **security.client_options()))
        producer = None if dry_run else await clients.enter_async_context(AIOKafkaProducer(
            bootstrap_servers=bootstrap, client_id=CLIENT_ID, acks="all",
            enable_idempotence=True, **security.client_options()))
        deliveries: list[asyncio.Future[Any]] = []
        async for letter in read_dead_letters(consumer, partitions, selection.since_ms):
            report.read += 1
            if not selection.wants(letter):
                continue
            cause = skip_cause(letter, source)
            if cause is None and producer is not None:
                # Sent in DLQ order: one key's dead letters share a partition, so a key's
                # events reach the source topic again in the order they were dead-lettered.
                deliveries.append(await producer.send(
                    source, letter.value, key=letter.key,
                    headers=[(REPLAY_HEADER, letter.coordinates.encode())]))
            report.count(letter, cause)
        await asyncio.gather(*deliveries)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=REPLAY_COMMAND,
        description="Republish dead letters to their source topic, with their original key.")
    parser.add_argument("--topic", required=True, help="the dead-letter topic to replay")
    parser.add_argument("--reason", action="append", choices=REASONS, default=[],
                        metavar="REASON", help="replay only dead letters of this reason "
                        f"(repeatable): {', '.join(REASONS)}")
    parser.add_argument("--since", type=_since_argument,
                        help="replay only dead letters from this time on: ISO 8601 with an "
                             "offset or Z, or a time ago such as 30m, 2h, 1d")
    parser.add_argument("--dry-run", action="store_true", help="report, publish nothing")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--bootstrap", help=f"host:port (default: ${BOOTSTRAP_ENV} or var/kafka/bootstrap)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        source_of_dead_letters(args.topic)  # refused before any connection is made
        bootstrap = args.bootstrap or default_bootstrap()
        report = asyncio.run(replay(bootstrap, args.topic,
                                    Selection(frozenset(args.reason), args.since),
                                    args.dry_run, KafkaSecurity.from_env(os.environ)))
    except Exception as exc:  # a command: one line, not a traceback
        print(f"error: {exc or type(exc).__name__}", file=sys.stderr)
        return 1
    print(json.dumps(report.as_json(), indent=2) if args.json else report.table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
