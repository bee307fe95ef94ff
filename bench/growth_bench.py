"""How cost grows with the work: one namespace grown to 10k, 100k and 1M memories; at each
size, `GET /v1/search` p50/p95, the worker's resident memory, and memory.write events/s into
that namespace (the write-time twin check searches it), each beside the rate at the first size.

    python -m bench.growth_bench [--sizes 10000,100000,1000000] [--events 2000]

Not in `make bench`: the whole run takes about 25 minutes on 2 cores, 17 of them loading the
million memories. The memories are loaded as bench/pipeline_bench.py loads its search corpus
(straight to Postgres and the index, with their entities; then the index's optimization and
fresh planner statistics, as a rebuild ends), the worker is stopped while they load and
started after, and the search is timed on its second pass over 300 queries (the first reads
pages from disk). Resident memory is the worker process's VmRSS after the searches and after
the writes.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.pipeline_bench import (
    NAMESPACE,
    SEARCH,
    load_memories,
    memory_texts,
    percentile,
    pipeline_rate,
    read_latencies,
)
from embedder.sentences import SENTENCES
from harness.stack import Stack, Worker

GROWTH_NAMESPACE = f"{NAMESPACE}-growth"
# The ingest's own rate is held against its rate at the first size, no lower than this.
RATE_KEPT = 0.9
SEARCH_P95_AT_1M_MS = 30.0


def resident_mb(worker: Worker) -> float:
    """The worker process's resident memory (Linux: /proc/<pid>/status VmRSS)."""
    assert worker.process is not None
    for line in Path(f"/proc/{worker.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for worker {worker.process.pid}")


async def measure_size(stack: Stack, worker: Worker, size: int, events: int,
                       step: int) -> dict[str, Any]:
    queries = [SENTENCES[(i * 13) % len(SENTENCES)] for i in range(300)]
    read_latencies(worker, "/v1/search", queries, GROWTH_NAMESPACE, **SEARCH)
    measured = read_latencies(worker, "/v1/search", queries, GROWTH_NAMESPACE, **SEARCH)
    rss_read = resident_mb(worker)
    # Texts of their own at each size, so that no write restates one of an earlier step.
    texts = [f"{text} (step {step})" for text in memory_texts(events)]
    rate = await pipeline_rate(stack, worker, texts, GROWTH_NAMESPACE)
    return {"size": size, "search_p50_ms": percentile(measured, 50) * 1000,
            "search_p95_ms": percentile(measured, 95) * 1000, "rss_read_mb": rss_read,
            "rss_written_mb": resident_mb(worker), "write_per_s": rate}


async def run_growth_bench(sizes: Sequence[int], events: int) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="memstream-growth-") as scratch:
        stack = Stack(Path(scratch)).start()
        try:
            worker = stack.worker()
            loaded = 0
            for step, size in enumerate(sorted(sizes)):
                worker.stop()
                started = time.perf_counter()
                await load_memories(stack, worker.index_url, size, GROWTH_NAMESPACE, loaded)
                load_s = time.perf_counter() - started
                loaded = size
                worker.start(timeout_s=600)
                measured = await measure_size(stack, worker, size, events, step)
                found.append({**measured, "load_s": load_s})
                print(format_growth(found), flush=True)
            worker.stop()
        finally:
            stack.stop()
    return found


def format_growth(found: Sequence[dict[str, Any]]) -> str:
    first = found[0]["write_per_s"]
    lines = [f"{'memories':>10}  {'search p50':>10}  {'search p95':>10}  {'worker RSS':>16}"
             f"  {'writes/s':>9}  {'vs first':>8}  {'load':>7}",
             "-" * 84]
    for row in found:
        lines.append(
            f"{row['size']:>10,}  {row['search_p50_ms']:>7.1f} ms  {row['search_p95_ms']:>7.1f} ms"
            f"  {row['rss_read_mb']:>5.0f}-{row['rss_written_mb']:>5.0f} MB"
            f"  {row['write_per_s']:>9.0f}  {row['write_per_s'] / first:>8.2f}"
            f"  {row['load_s']:>5.0f} s")
    last = found[-1]
    if last["size"] >= 1_000_000:
        lines.append(f"at {last['size']:,}: search p95 target <= {SEARCH_P95_AT_1M_MS:.0f} ms, "
                     f"writes/s target >= {RATE_KEPT:.2f} of the first size")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,1000000",
                        help="namespace sizes, comma-separated (memories)")
    parser.add_argument("--events", type=int, default=2000,
                        help="memory.write events timed at each size")
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",")]
    asyncio.run(run_growth_bench(sizes, args.events))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
