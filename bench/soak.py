"""Soak: minutes of load while workers, the broker and Postgres are killed in turn (SIGKILL,
then restarted on the same data and address), then the count of events lost and duplicated
in Postgres, the index and memory.updated. Both must be 0.

    python -m bench.soak [--minutes 5] [--rate 100] [--every 20] [--workers 2]

`make soak`; not part of `make test` (it runs for minutes). Two workers share a pgvector index
(`pg://`) in one consumer group; Postgres is durable (fsync on), as a crash test needs.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from harness.kafka_io import TopicReader, wait_caught_up
from harness.load import Publishing, exactly_once, memory_writes, pg_index_points
from harness.stack import Stack, Worker, crash_postgres
from schemas.topics import MEMORY_EVENTS, MEMORY_UPDATED

CRASHES = ("worker", "broker", "postgres")


async def crash(stack: Stack, workers: Sequence[Worker], kind: str, turn: int) -> None:
    if kind == "worker":
        victim = workers[turn % len(workers)]
        victim.kill()
        await asyncio.sleep(1)
        await asyncio.to_thread(victim.start)
    elif kind == "broker":
        stack.broker.kill()
        await asyncio.sleep(2)
        await asyncio.to_thread(stack.broker.start)
    else:
        crash_postgres(stack.postgres)
        await asyncio.sleep(2)
        await asyncio.to_thread(stack.postgres.start)


async def soak(minutes: float, rate: float, every_s: float, worker_count: int) -> int:
    with tempfile.TemporaryDirectory(prefix="memstream-soak-") as scratch:
        stack = Stack(Path(scratch), durable=True).start()
        try:
            group = f"memstream-soak-{uuid.uuid4().hex[:6]}"
            workers = [stack.worker(f"worker-{n}", index_url="pg://", app_id=group,
                                    MEMSTREAM_SESSION_TIMEOUT_S="6")
                       for n in range(worker_count)]
            for worker in workers:
                worker.start()
            writes = memory_writes(int(minutes * 60 * rate), namespaces=20, tag="soak")
            record_ids = {write.record_id for write in writes}
            announced = await TopicReader(stack.broker.bootstrap, MEMORY_UPDATED).start()
            publishing = Publishing(stack.broker.bootstrap, writes, rate)
            started = time.monotonic()
            producer = asyncio.create_task(publishing.run())
            crashes: Counter[str] = Counter()
            for turn, kind in enumerate(itertools.cycle(CRASHES)):
                await asyncio.sleep(every_s)
                if producer.done():
                    break
                print(f"{time.monotonic() - started:6.0f}s  kill -9 {kind}", flush=True)
                await crash(stack, workers, kind, turn)
                crashes[kind] += 1
            await producer

            def created() -> int:
                return len({json.loads(m.value)["record_id"]
                            for m in announced.messages} & record_ids)

            await announced.wait_for(lambda m: created() == len(writes), 600)
            await wait_caught_up(stack.broker.bootstrap, group, [MEMORY_EVENTS], 300)
            await asyncio.sleep(3)
            counted = await exactly_once(
                stack.pg_dsn, await pg_index_points(stack.pg_dsn, {w.namespace for w in writes}),
                writes, announced.messages)
            await announced.close()
        finally:
            stack.stop()
    rows = [
        ("duration", f"{minutes:g} min at {rate:g} events/s"),
        ("crashes (kill -9, restart)", ", ".join(f"{kind} {n}" for kind, n in
                                                 sorted(crashes.items()))),
        ("events published (acked)", f"{len(publishing.acked)} ({publishing.resent} resent)"),
        ("records in Postgres", str(counted.records)),
        ("points in the index", str(counted.index_points)),
        ("created announcements", str(counted.announcements)),
        ("events lost", str(counted.lost)),
        ("events duplicated", str(counted.duplicated)),
    ]
    width = max(len(name) for name, _ in rows)
    print("\n".join(f"{name:<{width}}  {value}" for name, value in rows))
    return 0 if counted.holds() else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--rate", type=float, default=100.0, help="events per second")
    parser.add_argument("--every", type=float, default=20.0, help="seconds between crashes")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    return asyncio.run(soak(args.minutes, args.rate, args.every, args.workers))


if __name__ == "__main__":
    raise SystemExit(main())
