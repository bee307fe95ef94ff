"""The context pack with every section filled: its latency at 100k memories and 10k chunks.

    python -m bench.pack_bench [--points 100000] [--chunks 10000] [--calls 200]

On a running worker whose namespace holds `points` memories (the pipeline bench's, in
`make bench`), this adds what the other sections read, then times `GET /v1/context` end to
end (query embedding included):

- planning: a copy of steveyegge/beads' own `.beads/issues.jsonl` (tests/fixtures/beads,
  MIT) in a checkout the worker knows (`MEMORY_PLANNING=beads`), and a `planning_ref` whose
  item has a blocker and ready siblings;
- history: runs of the pack's repo that failed on an error and were fixed, so the pack's
  `error` has a fix pattern and the runs have digests;
- documents: `chunks` doc chunks, HTTPX's documentation (bench/data/docs, BSD-3-Clause)
  chunked by the product's chunker, copied until there are enough, written straight to
  Postgres and the index as the pipeline bench writes its memories (vectors jittered per
  copy, so that no two are the same point).

Each pack asks for all of it: `planning_ref`, `repo`, `error`, a budget of 4,000 tokens and
`min_score=0`, so that no section is empty for want of relevance (the first answer is checked:
a section left empty fails the bench rather than flatter it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
import urllib.parse
import urllib.request
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench.doc_retrieval_eval import documents, load_questions
from bench.history_bench import TRACE
from bench.pipeline_bench import load_memories, percentile, store_directly
from embedder.model import Embedder
from embedder.sentences import SENTENCES
from harness.stack import MODEL_DIR, Stack, Worker
from memstream_client.events import DocUpsert, Provenance
from processors.documents.chunk_records import chunk_record
from processors.documents.chunking import chunk_document
from processors.recall.context_pack import SECTIONS
from processors.text.embedding import Vector
from publisher.kafka_publisher import Publisher
from schemas.records import Record

BEADS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "beads" / \
    "beads-2025-12" / "issues.jsonl"
REPO, PLANNING_REF = "bench-beads", "bd-2vh3.5"
FIXED_RUNS = 20
BUDGET_TOKENS = 4000
CALLS = 200
WARMUP = 20
WAIT_S = 120.0


def error_text(n: int) -> str:
    return TRACE.format(module="sync", line=40 + n % 3, ms=5000, item=n)


async def load_chunks(stack: Stack, index_url: str, namespace: str, n: int) -> None:
    """`n` doc chunks of the pack's repo straight to Postgres and the index (no worker may
    hold the index): HTTPX's documentation chunked once, copied under new doc ids."""
    embedder = Embedder.load(MODEL_DIR)
    try:
        chunks = [chunk for doc_id, text in documents()
                  for chunk in chunk_document(doc_id, text, "markdown", embedder.token_costs)]
        base = embedder.embed([chunk.embedded for chunk in chunks], role="passage")
    finally:
        embedder.close()
    rng = np.random.default_rng(11)
    provenance = Provenance(source_event_id="bench", source_topic="documents.events",
                            source_partition=0, source_offset=0, producer="bench")

    def chunk(i: int) -> tuple[Record, Vector]:
        copy, at = divmod(i, len(chunks))
        original = chunks[at]
        doc_id = f"copy-{copy}/{original.doc_id}"
        event = DocUpsert.model_validate({
            "event_id": f"bench-doc-{i}", "type": "doc.upsert", "namespace": namespace,
            "occurred_at": datetime.now(UTC).isoformat(), "producer": "bench",
            "payload": {"doc_id": doc_id, "text": original.text, "repo": REPO}})
        record = chunk_record(event, replace(
            original, doc_id=doc_id, content_hash=f"{original.content_hash}-{copy}"), provenance)
        vector = base[at] + rng.normal(0, 0.02, base.shape[1])
        return record, (vector / np.linalg.norm(vector)).astype(np.float32)

    await store_directly(stack, index_url, n, chunk)


async def publish_fixed_runs(stack: Stack, namespace: str) -> None:
    """Runs of the repo that met the error and the runs that fixed it, one task each."""
    async with Publisher(stack.broker.bootstrap, producer="bench") as publisher:
        for n in range(FIXED_RUNS):
            task = {"task_key": f"SYNC-{n}", "repo": REPO}
            failed, fixed = f"bench-failed-{n}", f"bench-fixed-{n}"
            await publisher.run_started(namespace, run_id=failed,
                                        intent=f"Sync the catalogue, part {n}", **task)
            await publisher.run_step(namespace, run_id=failed, kind="error",
                                     error=error_text(n))
            await publisher.run_finished(namespace, run_id=failed, status="failed",
                                         error=error_text(n))
            await publisher.run_started(namespace, run_id=fixed,
                                        intent=f"Sync the catalogue, part {n}", **task)
            await publisher.run_finished(namespace, run_id=fixed, status="succeeded",
                                         summary="Raised the fetch timeout to 30 s.",
                                         commits=[f"c0ffee{n}"])


def packed(worker: Worker, namespace: str, query: str) -> tuple[float, dict[str, Any]]:
    """One pack with every section asked for: its seconds end to end, and its answer."""
    url = f"{worker.base_url}/v1/context?" + urllib.parse.urlencode({
        "namespace": namespace, "query": query, "planning_ref": PLANNING_REF, "repo": REPO,
        "error": error_text(0), "budget_tokens": BUDGET_TOKENS, "min_score": 0})
    started = time.perf_counter()
    with urllib.request.urlopen(urllib.request.Request(url, headers=worker.headers),
                                timeout=20) as answer:
        body: dict[str, Any] = json.loads(answer.read())
    return time.perf_counter() - started, body


async def filled(worker: Worker, namespace: str, query: str) -> dict[str, Any]:
    """The first pack once every section has something (the runs' digests and fix pattern
    arrive through the stream)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        _, pack = packed(worker, namespace, query)
        empty = [name for name in SECTIONS if not pack["sections"][name]]
        if not empty and not pack["degraded"]:
            return pack
        if time.monotonic() > deadline:
            raise RuntimeError(f"the pack's sections {empty} stayed empty (degraded: "
                               f"{pack['degraded']}); see {worker.log_path}")
        await asyncio.sleep(1.0)


async def run_pack_bench(stack: Stack, worker: Worker, namespace: str, points: int,
                         chunks: int = 10_000, calls: int = CALLS) -> dict[str, Any]:
    """The pack's latency on a worker whose `namespace` holds `points` memories, once the
    other sections hold theirs (see the module docstring)."""
    checkout = stack.root / "pack-bench" / REPO
    (checkout / ".beads").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(BEADS, checkout / ".beads" / "issues.jsonl")
    worker.stop()
    await load_chunks(stack, worker.index_url, namespace, chunks)
    worker.extra_env.update(MEMORY_PLANNING="beads",
                            MEMSTREAM_PLANNING_REPOS=f"{REPO}={checkout}")
    worker.start()
    await publish_fixed_runs(stack, namespace)
    questions = [question.text for question in load_questions()]
    queries = [questions[i // 2 % len(questions)] if i % 2 else SENTENCES[i % len(SENTENCES)]
               for i in range(calls + WARMUP)]
    first = await filled(worker, namespace, queries[0])
    for query in queries[:WARMUP]:
        packed(worker, namespace, query)
    timed = [packed(worker, namespace, query) for query in queries[WARMUP:]]
    latencies = [seconds for seconds, _ in timed]
    answers = [answer for _, answer in timed]
    return {
        "points": points, "chunks": chunks, "calls": calls,
        "p50_ms": percentile(latencies, 50) * 1000, "p95_ms": percentile(latencies, 95) * 1000,
        "tokens": float(np.mean([answer["tokens"] for answer in answers])),
        "items": {name: float(np.mean([len(answer["sections"][name]) for answer in answers]))
                  for name in SECTIONS},
        "first_tokens": {name: use["tokens"] for name, use in first["section_tokens"].items()},
        "degraded": sum(bool(answer["degraded"]) for answer in answers),
    }


def pack_rows(r: dict[str, Any]) -> list[tuple[str, str, str]]:
    at = f"{r['points']:,} memories, {r['chunks']:,} chunks"
    items = ", ".join(f"{name} {count:.1f}" for name, count in r["items"].items())
    return [
        (f"GET /v1/context, every section filled, p50 ({at})", f"{r['p50_ms']:.1f} ms", ""),
        (f"GET /v1/context, every section filled, p95 ({r['calls']} packs)",
         f"{r['p95_ms']:.1f} ms", "<= 50 ms"),
        ("  items per pack by section", items, ""),
        (f"  tokens per pack (budget {BUDGET_TOKENS:,}); answers degraded",
         f"{r['tokens']:.0f}; {r['degraded']}", ""),
    ]


async def standalone(points: int, chunks: int, calls: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="memstream-pack-bench-") as scratch:
        stack = Stack(Path(scratch)).start()
        try:
            worker = stack.worker()
            namespace = "bench-pack"
            await load_memories(stack, worker.index_url, points, namespace)
            worker.start()
            return await run_pack_bench(stack, worker, namespace, points, chunks, calls)
        finally:
            stack.stop()


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pack_bench", description=__doc__)
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=CALLS)
    args = parser.parse_args()
    results = asyncio.run(standalone(args.points, args.chunks, args.calls))
    for name, value, target in pack_rows(results):
        print(f"{name:<62}  {value:>16}  {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
