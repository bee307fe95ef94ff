"""What reading each candidate's open correction costs a search (docs/lifecycle.md#a-correction-
awaiting-review): the records a search and a pack read first, by id, with and without the
lateral join that reads the invalidation waiting for a reviewer, now and as of a moment.

    python -m bench.contested_bench [--memories 100000] [--rounds 2000]

One namespace of `--memories` memories in a throwaway Postgres (random unit vectors, texts of a
few sentences), 1% of them contested by a pending invalidation diff and as many with a decided
one (approved or rejected: what an `as_of` read looks through). Each round reads 10 ids (a
search of 5: its first read) and 37 (the pack's long-term section of 30), 1 in 20 of them
contested, read once to bring its rows into the buffers, then each way in a shuffled order on
the same connection pool; the figures are the medians and 95th percentiles of the rounds, in
milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from datetime import UTC, datetime, timedelta

import asyncpg
import numpy as np

from memstream_client.events import Provenance
from schemas.records import Record
from stores.postgres.local_server import throwaway_postgres
from stores.postgres.migrate import apply_migrations
from stores.postgres.rows import create_pool, insert_new_records
from stores.records import CONTEST_COLUMNS, CONTEST_NOW, CONTEST_THEN, FOUND_COLUMNS

NAMESPACE = "bench"
T0 = datetime(2026, 11, 1, tzinfo=UTC)
WORDS = ("deploy", "staging", "billing", "service", "owner", "team", "version", "cluster",
         "standup", "retro", "vpn", "replica", "port", "budget", "schedule", "database",
         "index", "search", "memory", "agent", "review")
# The records' query of a read by id (stores/records.py `records_by_id`, and `records_as_of`
# beside its versions' query, which is the same either way): as it was, and with the contest.
QUERIES = {
    "now, before": f"""
        SELECT {FOUND_COLUMNS} FROM unnest($2::text[]) AS wanted (id)
        JOIN records ON records.record_id = wanted.id WHERE namespace = $1""",
    "now, with contests": f"""
        SELECT {FOUND_COLUMNS}, {CONTEST_COLUMNS} FROM unnest($2::text[]) AS wanted (id)
        JOIN records ON records.record_id = wanted.id {CONTEST_NOW} WHERE namespace = $1""",
    "as of, before": f"""
        SELECT {FOUND_COLUMNS} FROM unnest($2::text[]) AS wanted (id)
        JOIN records ON records.record_id = wanted.id
        WHERE namespace = $1 AND stored_at <= $3""",
    "as of, with contests": f"""
        SELECT {FOUND_COLUMNS}, {CONTEST_COLUMNS} FROM unnest($2::text[]) AS wanted (id)
        JOIN records ON records.record_id = wanted.id {CONTEST_THEN}
        WHERE namespace = $1 AND stored_at <= $3""",
}


def memory(n: int, rng: random.Random) -> Record:
    text = ". ".join(" ".join(rng.choices(WORDS, k=9)).capitalize() for _ in range(3)) + "."
    return Record(record_id=f"mem_{n:024x}", namespace=NAMESPACE, record_kind="memory",
                  text=text, memory_type="fact", created_at=T0 + timedelta(seconds=n),
                  provenance=Provenance(source_event_id=f"e{n}", source_topic="memory.events",
                                        source_partition=0, source_offset=n, producer="bench"))


async def fill(pool: asyncpg.Pool, memories: int) -> list[str]:
    """The namespace's memories; returns the ids of those contested."""
    rng = random.Random(7)
    vectors = np.random.default_rng(7).standard_normal((1000, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    for start in range(0, memories, 1000):
        batch = [(memory(n, rng), vectors[n % 1000]) for n in range(start,
                                                                    min(start + 1000, memories))]
        async with pool.acquire() as connection, connection.transaction():
            await insert_new_records(connection, batch)
    ids = [f"mem_{n:024x}" for n in range(memories)]
    chosen = rng.sample(ids, memories // 50)
    # Half of them pending, half decided.
    contested = chosen[: memories // 100]
    diffs = [(f"inv_{record_id}", record_id, ids[(int(record_id[4:], 16) + 1) % memories],
              "pending" if record_id in contested else rng.choice(["approved", "rejected"]))
             for record_id in chosen]
    async with pool.acquire() as connection, connection.transaction():
        await connection.executemany(
            "INSERT INTO pending_diffs (diff_id, namespace, record_id, base_version, proposed,"
            " proposer, proposed_at, state, decided_at)"
            " VALUES ($1, $2, $3, 1, jsonb_build_object('invalidated_by', $4::text,"
            " 'valid_until', now()::text), 'bench', now(), $5,"
            " CASE WHEN $5 = 'pending' THEN NULL ELSE now() END)",
            [(diff_id, NAMESPACE, record_id, newer, state)
             for diff_id, record_id, newer, state in diffs])
        await connection.executemany(
            "INSERT INTO lifecycle_events (event_id, namespace, record_id, type, outcome,"
            " version) VALUES ($1, $2, $3, 'memory.write', 'proposed', 1)",
            [(diff_id, NAMESPACE, record_id) for diff_id, record_id, _, _ in diffs])
        await connection.execute("ANALYZE")
    return contested


async def timed(pool: asyncpg.Pool, sql: str, *args: object) -> float:
    started = time.perf_counter()
    await pool.fetch(sql, *args)
    return (time.perf_counter() - started) * 1000


def figures(samples: list[float]) -> str:
    ordered = sorted(samples)
    return (f"p50 {statistics.median(ordered):.3f} ms, "
            f"p95 {ordered[int(0.95 * (len(ordered) - 1))]:.3f} ms")


async def run(memories: int, rounds: int) -> None:
    with throwaway_postgres() as dsn:
        await apply_migrations(dsn)
        pool = await create_pool(dsn)
        try:
            started = time.perf_counter()
            contested = await fill(pool, memories)
            print(f"{memories} memories, {len(contested)} contested, filled in "
                  f"{time.perf_counter() - started:.0f} s")
            rng = random.Random(11)
            moment = datetime.now(UTC)
            plain = [f"mem_{n:024x}" for n in range(memories)]
            for size in (10, 37):
                samples: dict[str, list[float]] = {name: [] for name in QUERIES}
                for _ in range(rounds):
                    ids = rng.sample(plain, size - size // 20) + rng.sample(contested,
                                                                           size // 20)
                    # The rows in the buffers first, then each way in another order every
                    # round: the first to read a round's rows would pay for the others.
                    await pool.fetch(QUERIES["now, before"], NAMESPACE, ids)
                    for name in rng.sample(list(QUERIES), len(QUERIES)):
                        args = (NAMESPACE, ids) if name.startswith("now") else (
                            NAMESPACE, ids, moment)
                        samples[name].append(await timed(pool, QUERIES[name], *args))
                for name, taken in samples.items():
                    print(f"{size} ids, {name}: {figures(taken)}")
        finally:
            await pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    asyncio.run(run(args.memories, args.rounds))


if __name__ == "__main__":
    main()
