"""What an agent's way in costs on top of a search: the MCP server's `recall` over streamable
HTTP, and the Python SDK, each beside a bare HTTP request of the same search.

    python -m bench.agent_bench [--points 100000] [--calls 200]

On a worker serving a namespace of `--points` memories (alone, this loads them as
bench/pipeline_bench.py does; inside `make bench`, the pipeline bench's search phase hands over
its 100k), with a key bound to that namespace:
- `recall` through the mcp SDK's own client, over streamable HTTP, against the MCP server run
  as the Procfile runs it (`python -m memstream_client.mcp_server.http`, its own process, on a
  free port);
- the same search (`GET /v1/search`, the same parameters) by `AsyncMemoryClient.search` and by a
  bare `httpx.AsyncClient` request of the same URL, on one shared connection pool; and by
  `MemoryClient.search` and a bare `httpx.Client`, on another;
- the same bare async request by a key bound to an agent, whose searches blend the agent's
  adaptive scores (one more Postgres read per search, beside the records'): scoring on, where
  the first bare request is scoring off.
Each query is asked of all six in turn, the first to ask it rotating, so that the machine's
drift and the worker's term-count cache (the first asker of a term pays it) fall on each alike.
Bare requests read their JSON answer too: the SDK's overhead is its query building and typed
answers, not the parsing any caller does.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from bench.pipeline_bench import load_memories, percentile
from embedder.sentences import SENTENCES
from harness.stack import Stack, Worker, free_port
from memstream_client.mcp_server.callers import NAMESPACE_HEADER
from memstream_client.sdk import AsyncMemoryClient, MemoryClient
from streams.plumbing.config import REPO_ROOT

NAMESPACE = "bench-agent"
WARM_UP = 20
LIMIT = 10
MIN_SCORE = 0.3
START_S = 30.0
CALLS = 200
WAYS = ("mcp_recall", "httpx_async", "sdk_async", "httpx_sync", "sdk_sync", "httpx_scored")


@dataclass(frozen=True)
class Target:
    """Where the searches go: the worker, a key bound to the namespace, the namespace."""

    url: str
    key: str
    namespace: str
    # A key bound to an agent: its searches blend the agent's adaptive scores.
    agent_key: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


def agent_queries(n: int) -> list[str]:
    """Varied questions: real sentences, not the memories' own texts."""
    return [SENTENCES[(i * 13 + 5) % len(SENTENCES)] for i in range(n)]


@contextmanager
def mcp_http_server(worker_url: str) -> Iterator[str]:
    """`python -m memstream_client.mcp_server.http` as the Procfile runs it, on a free port, calling
    the worker; yields its URL."""
    port = free_port()
    environment = {name: value for name, value in os.environ.items()
                   if not name.startswith("MEMSTREAM_")}
    with tempfile.TemporaryDirectory(prefix="memstream-bench-mcp-") as home:
        # A HOME of its own: no config file of this machine's reaches the server.
        environment.update(PYTHONPATH=str(REPO_ROOT), MEMSTREAM_URL=worker_url,
                           MEMSTREAM_MCP_PORT=str(port), HOME=home)
        process = subprocess.Popen([sys.executable, "-m", "memstream_client.mcp_server.http"],
                                   cwd=REPO_ROOT, env=environment)
        try:
            wait_listening(process, port)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            process.terminate()
            process.wait(timeout=10)


def wait_listening(process: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + START_S
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the MCP server exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the MCP server does not listen after {START_S} s") from None
            time.sleep(0.1)


def search_params(target: Target, query: str) -> dict[str, str | int | float]:
    return {"namespace": target.namespace, "query": query, "limit": LIMIT,
            "min_score": MIN_SCORE}


def searched(body: dict[str, Any], query: str) -> None:
    """A search answered by the index, with hits: else the figure is not the one meant."""
    if body["degraded"]:
        raise RuntimeError(f"search of {query!r} was answered degraded (Postgres fallback)")
    if not body["hits"]:
        raise RuntimeError(f"search of {query!r} found nothing: a search without hits is "
                           "not the round trip meant")


async def timed_calls(target: Target, mcp_url: str,
                      queries: Sequence[str]) -> dict[str, list[float]]:
    """Each query asked of the six ways in turn; seconds per call, by way."""
    async_pool = httpx.AsyncHTTPTransport()
    sync_pool = httpx.HTTPTransport()
    mcp_headers = {**target.headers, NAMESPACE_HEADER: target.namespace}
    async with httpx.AsyncClient(base_url=target.url, headers=target.headers,
                                 transport=async_pool) as bare_async, \
            AsyncMemoryClient(target.url, key=target.key, namespace=target.namespace, env={},
                              transport=async_pool) as sdk_async, \
            httpx.AsyncClient(base_url=target.url, transport=async_pool, headers={
                "Authorization": f"Bearer {target.agent_key}"}) as scored_async, \
            create_mcp_http_client(headers=mcp_headers) as mcp_http, \
            Client(streamable_http_client(mcp_url, http_client=mcp_http)) as agent:
        with httpx.Client(base_url=target.url, headers=target.headers,
                          transport=sync_pool) as bare_sync, \
                MemoryClient(target.url, key=target.key, namespace=target.namespace, env={},
                             transport=sync_pool) as sdk_sync:

            async def mcp_recall(query: str) -> None:
                result = await agent.call_tool(
                    "recall", {"query": query, "limit": LIMIT, "min_score": MIN_SCORE})
                if result.is_error:
                    raise RuntimeError(f"recall of {query!r} failed: {result.content}")
                if not (result.structured_content or {}).get("hits"):
                    raise RuntimeError(f"recall of {query!r} found nothing")

            async def httpx_async(query: str) -> None:
                answer = await bare_async.get("/v1/search",
                                              params=search_params(target, query))
                searched(answer.raise_for_status().json(), query)

            async def httpx_scored(query: str) -> None:
                answer = await scored_async.get("/v1/search",
                                                params=search_params(target, query))
                searched(answer.raise_for_status().json(), query)

            async def sdk_async_search(query: str) -> None:
                found = await sdk_async.search(query, limit=LIMIT, min_score=MIN_SCORE)
                searched(found.raw, query)

            async def httpx_sync(query: str) -> None:
                answer = bare_sync.get("/v1/search", params=search_params(target, query))
                searched(answer.raise_for_status().json(), query)

            async def sdk_sync_search(query: str) -> None:
                searched(sdk_sync.search(query, limit=LIMIT, min_score=MIN_SCORE).raw, query)

            ways: dict[str, Callable[[str], Awaitable[None]]] = {
                "mcp_recall": mcp_recall, "httpx_async": httpx_async,
                "sdk_async": sdk_async_search, "httpx_sync": httpx_sync,
                "sdk_sync": sdk_sync_search, "httpx_scored": httpx_scored}
            for query in agent_queries(WARM_UP):
                for call in ways.values():
                    await call(query)
            latencies: dict[str, list[float]] = {way: [] for way in WAYS}
            for n, query in enumerate(queries):
                for way in WAYS[n % len(WAYS):] + WAYS[:n % len(WAYS)]:
                    started = time.perf_counter()
                    await ways[way](query)
                    latencies[way].append(time.perf_counter() - started)
    return latencies


def summary(latencies: dict[str, list[float]], points: int) -> dict[str, Any]:
    """p50, p95 and p99 in ms of each way."""
    return {"points": points, "calls": len(latencies["mcp_recall"]),
            **{f"{way}_p{q}_ms": percentile(values, q) * 1000
               for way, values in latencies.items() for q in (50, 95, 99)}}


async def run_agent_bench(stack: Stack, worker: Worker, namespace: str, points: int,
                          calls: int = CALLS) -> dict[str, Any]:
    """The six ways on a running worker whose `namespace` holds `points` memories."""
    key = stack.make_key("--namespace", namespace, "--perm", "read", "--label", "agent-bench")
    agent_key = stack.make_key("--namespace", namespace, "--perm", "read", "--agent",
                               "bench-agent", "--label", "agent-bench-scored")
    target = Target(worker.base_url, key, namespace, agent_key)
    with mcp_http_server(worker.base_url) as mcp_url:
        return summary(await timed_calls(target, mcp_url, agent_queries(calls)), points)


def agent_rows(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    r = results
    at = f"at {r['points']:,} memories"

    def ms(way: str, q: int) -> str:
        return f"{r[f'{way}_p{q}_ms']:.1f} ms"

    def added(way: str, bare: str, q: int) -> str:
        return f"{r[f'{way}_p{q}_ms'] - r[f'{bare}_p{q}_ms']:+.1f} ms"

    return [
        (f"MCP recall, streamable HTTP, p50 {at}", ms("mcp_recall", 50), ""),
        (f"MCP recall, streamable HTTP, p95 {at}", ms("mcp_recall", 95), "<= 30 ms"),
        (f"MCP recall, streamable HTTP, p99 ({r['calls']} calls)", ms("mcp_recall", 99), ""),
        ("  the same searches, bare httpx GET /v1/search p50", ms("httpx_async", 50), ""),
        ("  the same searches, bare httpx GET /v1/search p95", ms("httpx_async", 95), ""),
        ("  added by the MCP server and protocol, p50",
         added("mcp_recall", "httpx_async", 50), ""),
        ("  added by the MCP server and protocol, p95",
         added("mcp_recall", "httpx_async", 95), ""),
        ("  the same searches by an agent's key (scoring on) p50", ms("httpx_scored", 50), ""),
        ("  the same searches by an agent's key (scoring on) p95", ms("httpx_scored", 95), ""),
        ("  scoring on over off, p95", added("httpx_scored", "httpx_async", 95), "<= +2 ms"),
        ("SDK AsyncMemoryClient.search p50 (the same searches)", ms("sdk_async", 50), ""),
        ("SDK AsyncMemoryClient.search p95", ms("sdk_async", 95), ""),
        ("  SDK over bare httpx, async, p50", added("sdk_async", "httpx_async", 50), ""),
        ("  SDK over bare httpx, async, p95", added("sdk_async", "httpx_async", 95), ""),
        ("SDK MemoryClient.search p50", ms("sdk_sync", 50), ""),
        ("SDK MemoryClient.search p95", ms("sdk_sync", 95), ""),
        ("  bare httpx.Client p50", ms("httpx_sync", 50), ""),
        ("  bare httpx.Client p95", ms("httpx_sync", 95), ""),
        ("  SDK over bare httpx, sync, p50", added("sdk_sync", "httpx_sync", 50), ""),
        ("  SDK over bare httpx, sync, p95", added("sdk_sync", "httpx_sync", 95), ""),
    ]


async def run(points: int, calls: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="memstream-bench-agent-") as scratch:
        stack = Stack(Path(scratch)).start()
        try:
            worker = stack.worker()
            await load_memories(stack, worker.index_url, points, NAMESPACE)
            worker.start()
            return await run_agent_bench(stack, worker, NAMESPACE, points, calls)
        finally:
            stack.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=CALLS)
    args = parser.parse_args(argv)
    results = asyncio.run(run(args.points, args.calls))
    for name, value, target in agent_rows(results):
        print(f"{name:<62}  {value:>16}  {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
