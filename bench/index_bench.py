"""Index latency and throughput, through the VectorIndex interface the worker uses.

    python -m bench.index_bench [--points 100000] [--local-points 10000] [--namespaces 100]

qdrant-edge: upsert throughput (batches of 512), namespace-filtered search p50/p95 before and
after `optimize()`, the optimize time, reopen time. qdrant-client local mode: the same at a
smaller size (it is a pure-Python brute-force engine). Random unit vectors of dimension 384.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from stores.index.factory import open_index
from stores.index.protocol import DIM, IndexPoint, SearchScope, VectorIndex
from stores.index.qdrant_edge import EdgeIndex

BATCH = 512
KINDS = ("memory", "run_digest", "fix_pattern")


def run_index_bench(
    n_points: int = 100_000,
    *,
    n_local: int = 10_000,
    n_namespaces: int = 100,
    n_queries: int = 500,
    seed: int = 0,
) -> dict[str, dict[str, float]]:
    """Measure both backends in temporary directories; return {backend: {metric: value}}."""
    return asyncio.run(_run(n_points, n_local, n_namespaces, n_queries, seed))


async def _run(
    n_points: int, n_local: int, n_namespaces: int, n_queries: int, seed: int
) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="memstream-bench-") as tmp:
        edge = EdgeIndex(Path(tmp) / "edge")
        await edge.ensure_collection()
        try:
            stats = {"points": float(n_points)}
            stats |= await _load(edge, n_points, n_namespaces, seed)
            stats |= _prefixed("search", await _search(edge, n_namespaces, n_queries, seed))
            started = time.perf_counter()
            await edge.optimize()
            stats["optimize_s"] = time.perf_counter() - started
            stats |= _prefixed("search_optimized",
                               await _search(edge, n_namespaces, n_queries, seed))
        finally:
            await edge.close()
        started = time.perf_counter()
        reopened = EdgeIndex(Path(tmp) / "edge")
        await reopened.ensure_collection()
        stats["reopen_s"] = time.perf_counter() - started
        await reopened.close()
        results["qdrant-edge"] = stats

        local = open_index(f"local://{Path(tmp) / 'local'}")
        await local.ensure_collection()
        try:
            stats = {"points": float(n_local)}
            stats |= await _load(local, n_local, n_namespaces, seed)
            stats |= _prefixed("search", await _search(local, n_namespaces, n_queries, seed))
        finally:
            await local.close()
        results["qdrant-client local"] = stats
    return results


def _unit_vectors(rng: np.random.Generator, n: int) -> NDArray[np.float32]:
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    normed: NDArray[np.float32] = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return normed


async def _load(index: VectorIndex, n: int, n_namespaces: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    elapsed = 0.0
    for start in range(0, n, BATCH):
        size = min(BATCH, n - start)
        vectors = _unit_vectors(rng, size)
        points = [
            IndexPoint(
                f"rec-{i}",
                vectors[i - start],
                {"namespace": f"ns-{i % n_namespaces}", "record_kind": KINDS[i % 3],
                 "scope": "shared", "agent_id": None, "expires_at": None,
                 "tags": [f"t{i % 7}"], "related_ids": [f"rec-{i // 2}"],
                 "created_at": 1.7e9 + i},
            )
            for i in range(start, start + size)
        ]
        began = time.perf_counter()
        await index.upsert(points)
        elapsed += time.perf_counter() - began
    return {"upsert_points_per_s": n / elapsed, "upsert_batch_ms": 1000 * elapsed / -(-n // BATCH)}


async def _search(
    index: VectorIndex, n_namespaces: int, n_queries: int, seed: int
) -> dict[str, float]:
    rng = np.random.default_rng(seed + 1)
    queries = _unit_vectors(rng, n_queries)
    latencies: list[float] = []
    for i, query in enumerate(queries):
        began = time.perf_counter()
        hits = await index.search(query, SearchScope(f"ns-{i % n_namespaces}", 10, -1.0))
        latencies.append(time.perf_counter() - began)
        if len(hits) != 10:
            raise AssertionError(f"expected 10 hits, got {len(hits)}")
    ms = np.array(latencies) * 1000
    return {"p50_ms": float(np.percentile(ms, 50)), "p95_ms": float(np.percentile(ms, 95))}


def _prefixed(prefix: str, stats: dict[str, float]) -> dict[str, float]:
    return {f"{prefix}_{key}": value for key, value in stats.items()}


def format_table(results: dict[str, dict[str, Any]]) -> str:
    metrics = list(dict.fromkeys(m for stats in results.values() for m in stats))
    backends = list(results)
    width = max(len(m) for m in metrics)
    lines = [f"{'metric':<{width}}  " + "  ".join(f"{b:>20}" for b in backends)]
    for metric in metrics:
        cells = []
        for backend in backends:
            value = results[backend].get(metric)
            cells.append(f"{'-':>20}" if value is None else f"{value:>20,.2f}")
        lines.append(f"{metric:<{width}}  " + "  ".join(cells))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.index_bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=100_000, help="qdrant-edge points")
    parser.add_argument("--local-points", type=int, default=10_000,
                        help="qdrant-client local-mode points")
    parser.add_argument("--namespaces", type=int, default=100)
    parser.add_argument("--queries", type=int, default=500)
    args = parser.parse_args()
    results = run_index_bench(args.points, n_local=args.local_points,
                              n_namespaces=args.namespaces, n_queries=args.queries)
    print(format_table(results))


if __name__ == "__main__":
    main()
