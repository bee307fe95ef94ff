"""What authentication adds to a search.

    python -m bench.auth_bench [--points 20000] [--queries 1000] [--rounds 4]

Two figures, on a real local stack:
- the key check alone (`streams.api.auth.Authenticator` over the keys in Postgres), in process,
  p50 and p95 over 2,000 checks;
- `GET /v1/search` end to end at `--points` memories in one namespace, the same queries with
  authentication on (a key per request) and off (MEMSTREAM_AUTH=off), the same worker
  restarted between runs, on and off alternating for `--rounds` rounds so that the machine's
  drift falls on both alike. The overhead is the difference of the p95s (the median run of
  each side).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench.pipeline_bench import load_memories, percentile, read_latencies
from embedder.sentences import SENTENCES
from harness.stack import Stack, Worker
from processors.api.access import PERMISSIONS
from stores.api_keys import KeyGrant, PostgresApiKeys
from streams.api.auth import Authenticator

NAMESPACE = "bench-auth"
CHECKS = 2000


async def key_check_latencies(pg_dsn: str) -> list[float]:
    keys = await PostgresApiKeys.connect(pg_dsn)
    try:
        made = await keys.make_key(KeyGrant(NAMESPACE, frozenset(PERMISSIONS)))
        authenticator = Authenticator(keys, enabled=True)
        header = f"Bearer {made.token}"
        for _ in range(100):
            await authenticator.caller(header)
        latencies = []
        for _ in range(CHECKS):
            started = time.perf_counter()
            await authenticator.caller(header)
            latencies.append(time.perf_counter() - started)
        return latencies
    finally:
        await keys.close()


def search_p95_ms(worker: Worker, queries: Sequence[str], auth: bool) -> float:
    worker.stop()
    worker.extra_env["MEMSTREAM_AUTH"] = "on" if auth else "off"
    worker.start()
    params = {"limit": 10, "min_score": 0.3}
    read_latencies(worker, "/v1/search", queries[:30], NAMESPACE, **params)
    return percentile(read_latencies(worker, "/v1/search", queries, NAMESPACE, **params),
                      95) * 1000


async def run(points: int, queries: int, rounds: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="memstream-bench-auth-") as scratch:
        stack = Stack(Path(scratch)).start()
        try:
            checks = await key_check_latencies(stack.pg_dsn)
            worker = stack.worker()
            await load_memories(stack, worker.index_url, points, NAMESPACE)
            asked = [SENTENCES[(i * 13) % len(SENTENCES)] for i in range(queries)]
            on, off = [], []
            for _ in range(rounds):
                on.append(search_p95_ms(worker, asked, auth=True))
                off.append(search_p95_ms(worker, asked, auth=False))
            worker.stop()
        finally:
            stack.stop()
    return {"points": points, "check_p50_ms": percentile(checks, 50) * 1000,
            "check_p95_ms": percentile(checks, 95) * 1000,
            "search_p95_on_ms": statistics.median(on),
            "search_p95_off_ms": statistics.median(off)}


def auth_rows(results: dict[str, float]) -> list[tuple[str, str, str]]:
    on, off = results["search_p95_on_ms"], results["search_p95_off_ms"]
    return [
        ("API key check alone p50 (Postgres lookup, in process)",
         f"{results['check_p50_ms']:.2f} ms", ""),
        ("API key check alone p95", f"{results['check_p95_ms']:.2f} ms", ""),
        (f"GET /v1/search p95 at {results['points']:,.0f} memories, auth off",
         f"{off:.1f} ms", ""),
        ("  auth on", f"{on:.1f} ms", ""),
        ("  added by authentication", f"{on - off:+.2f} ms", "<= 1 ms"),
    ]


def run_auth_bench(points: int = 20_000, queries: int = 1000,
                   rounds: int = 4) -> list[tuple[str, str, str]]:
    return auth_rows(asyncio.run(run(points, queries, rounds)))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)
    for name, value, target in run_auth_bench(args.points, args.queries, args.rounds):
        print(f"{name:<62}  {value:>16}  {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
