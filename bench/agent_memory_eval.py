"""Retrieval on agent memories with near-miss distractors (bench/data/agent_memories.json):
lessons, decisions, facts, preferences, handoffs and commitments, each question answered by
one memory and tempted by others on the same topic that differ in the service, environment,
version, person, number or date.

    python -m bench.agent_memory_eval

The memories go through the real pipeline; each question is asked on `/v1/search` with its
default `min_score` (the answer must be shown, not only ranked). Printed:
R@1 and R@3 (the answer within the top k), and how often a near miss ranks above the answer,
for the product and, in the same run, dense-only and BM25 rankings.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.retrieval_eval import BM25Okapi, content_tokens
from embedder.model import Embedder
from harness.kafka_io import TopicReader, produce
from harness.stack import MODEL_DIR, Stack
from memstream_client.ids import memory_record_id
from schemas.topics import MEMORY_EVENTS, MEMORY_UPDATED

DATA_FILE = Path(__file__).parent / "data" / "agent_memories.json"
KS = (1, 3)


@dataclass(frozen=True)
class Figures:
    at: dict[int, float]
    near_miss_above: float


def figures(rankings: Sequence[Sequence[str]], questions: Sequence[dict[str, Any]]) -> Figures:
    """R@k of the answer, and the share of questions where a near miss outranks it."""
    at = {k: float(np.mean([q["answer"] in ranked[:k]
                            for q, ranked in zip(questions, rankings, strict=True)]))
          for k in KS}
    above = []
    for question, ranked in zip(questions, rankings, strict=True):
        answer_rank = ranked.index(question["answer"]) if question["answer"] in ranked \
            else len(ranked)
        above.append(any(miss in ranked[:answer_rank] for miss in question["near_miss"]))
    return Figures(at, float(np.mean(above)))


async def product_rankings(data: dict[str, Any]) -> list[list[str]]:
    run = uuid.uuid4().hex[:8]
    namespace = f"agents-{run}"
    memories = data["memories"]
    events = {memory["key"]: json.dumps({
        "event_id": f"{run}:{memory['key']}", "type": "memory.write", "namespace": namespace,
        "occurred_at": datetime(2026, 11, 1, tzinfo=UTC).isoformat(), "producer": "bench",
        "payload": {"text": memory["text"], "memory_type": memory["type"]},
    }).encode() for memory in memories}
    keys = {memory_record_id(namespace, f"{run}:{key}"): key for key in events}
    with tempfile.TemporaryDirectory(prefix="memstream-agent-eval-") as scratch, \
            Stack(Path(scratch)) as stack:
        worker = stack.worker()
        worker.start()
        async with TopicReader(stack.broker.bootstrap, MEMORY_UPDATED) as updates:
            await produce(stack.broker.bootstrap, MEMORY_EVENTS,
                          [(namespace.encode(), value) for value in events.values()])
            await updates.wait_for(lambda m: len(keys.keys() & {
                json.loads(x.value)["record_id"] for x in m}) == len(keys), 120)
        rankings = []
        async with httpx.AsyncClient(base_url=worker.base_url, headers=worker.headers,
                                     timeout=30) as client:
            for question in data["questions"]:
                # The route's default min_score: what an agent that asks plainly is shown.
                answer = await client.get("/v1/search", params={
                    "namespace": namespace, "query": question["question"], "limit": 10})
                answer.raise_for_status()
                rankings.append([keys[hit["record_id"]] for hit in answer.json()["hits"]])
    return rankings


def baseline_rankings(data: dict[str, Any]) -> dict[str, list[list[str]]]:
    memories = data["memories"]
    questions = [q["question"] for q in data["questions"]]
    keys = [memory["key"] for memory in memories]
    with Embedder.load(MODEL_DIR) as embedder:
        documents = embedder.embed([memory["text"] for memory in memories], role="passage")
        queries = embedder.embed(questions, role="query")
    dense = [[keys[i] for i in np.argsort(-(documents @ query), kind="stable")]
             for query in queries]
    bm25 = BM25Okapi([content_tokens(memory["text"]) for memory in memories])
    lexical = [[keys[i] for i in np.argsort(-bm25.scores(content_tokens(q)), kind="stable")]
               for q in questions]
    return {"dense (int8 MiniLM)": dense, "BM25 (stemmed, stop words out)": lexical}


def evaluate(data_file: Path = DATA_FILE) -> dict[str, Figures]:
    data = json.loads(data_file.read_text())
    results = {"product (/v1/search)": figures(asyncio.run(product_rankings(data)),
                                               data["questions"])}
    for name, rankings in baseline_rankings(data).items():
        results[name] = figures(rankings, data["questions"])
    return results


def run_agent_memory_eval() -> list[tuple[str, str, str]]:
    """`make bench`'s rows."""
    results = evaluate()
    product = results["product (/v1/search)"]
    return [
        ("agent memories with near misses, /v1/search R@1", f"{product.at[1]:.3f}", ""),
        ("  near miss ranked above the answer", f"{product.near_miss_above:.3f}", ""),
        ("  same run, dense only R@1", f"{results['dense (int8 MiniLM)'].at[1]:.3f}", ""),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m bench.agent_memory_eval",
                            description=__doc__).parse_args(argv)
    results = evaluate()
    print(f"{'retriever':<34}  {'R@1':>5}  {'R@3':>5}  near miss above")
    for name, result in results.items():
        print(f"{name:<34}  {result.at[1]:>5.3f}  {result.at[3]:>5.3f}  "
              f"{result.near_miss_above:>5.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
