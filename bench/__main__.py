"""`make bench`: every benchmark, one table.

    python -m bench [--events 3000] [--search-points 100000]

The embedder alone (int8 vs fp32 in the same run, their parity), error signatures per second
on one core, digest build and fix pattern rebuild times, consolidation of 10k memories and the
fraction of LoCoMo's dev turns it merges (bench/consolidation_locomo.py), then
the pipeline on a real local stack (see bench/pipeline_bench.py for what each figure means),
and evidence recall of /v1/search on LoCoMo's development conversations beside baselines
computed in the same run (bench/retrieval_eval.py), the right chunk of HTTPX's documentation
for 50 questions and chunks per second on ingest (bench/doc_retrieval_eval.py), and what API
keys add to a search
(bench/auth_bench.py); on the pipeline's 100k memories, the MCP server's `recall` over
streamable HTTP and the SDK beside bare HTTP (bench/agent_bench.py), then the context pack
with every section filled: 10k doc chunks, a Beads work item, fixed runs (bench/pack_bench.py).
The index backends alone:
`python -m bench.index_bench`; the embedder's batch sweep: `python -m bench.embedder_bench
--sweep`; signature grouping accuracy on a labelled corpus: `python -m bench.signature_grouping`;
the refusal rules' precision and recall per reason: `python -m bench.refusal_eval`; the
write-time twin threshold's sweep: `python -m bench.duplicate_threshold`; the gap grouping
threshold: `python -m bench.gap_grouping`.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence
from typing import Any

from bench.agent_bench import agent_rows, run_agent_bench
from bench.agent_memory_eval import run_agent_memory_eval
from bench.auth_bench import run_auth_bench
from bench.consolidation_bench import run_consolidation_bench
from bench.consolidation_locomo import run_consolidation_locomo
from bench.doc_retrieval_eval import run_doc_retrieval_eval
from bench.duplicate_threshold import duplicate_rows
from bench.embedder_bench import run_embedder_bench
from bench.history_bench import run_history_bench
from bench.invalidation_eval import invalidation_rows
from bench.link_eval import run_link_eval
from bench.pack_bench import pack_rows, run_pack_bench
from bench.pipeline_bench import format_table, run_pipeline_bench
from bench.ratings_eval import run_ratings_eval
from bench.refusal_eval import refusal_rows
from bench.retrieval_eval import run_retrieval_eval
from bench.signature_bench import run_signature_bench, signature_rows
from embedder.build import main as build_main
from embedder.models import MODELS, model_dir
from harness.stack import MODEL, MODEL_DIR, Stack, Worker


async def on_corpus(stack: Stack, worker: Worker, namespace: str,
                    points: int) -> dict[str, Any]:
    """What is measured on the pipeline's corpus: the agents' ways to search it, then the
    pack once the other sections are filled (which adds chunks, runs and planning)."""
    return {"agent": await run_agent_bench(stack, worker, namespace, points),
            "pack": await run_pack_bench(stack, worker, namespace, points)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--search-points", type=int, default=100_000)
    parser.add_argument("--latency-seconds", type=float, default=20.0)
    args = parser.parse_args(argv)

    for name in MODELS:
        build_main(["--model", name])
    embedder = run_embedder_bench(MODEL_DIR)
    others = {name: run_embedder_bench(model_dir(name)) for name in MODELS if name != MODEL.name}
    pipeline = asyncio.run(
        run_pipeline_bench(args.events, args.search_points, args.latency_seconds,
                           on_corpus=on_corpus))

    rows = [
        (f"embedder {MODEL.name} int8 ({embedder['sentences']} sentences, calls of "
         f"{embedder['batch_size']})", f"{embedder['int8']['sentences_per_s']:.0f} /s", ""),
        ("embedder fp32 (same run)", f"{embedder['fp32']['sentences_per_s']:.0f} /s", ""),
        ("int8 vs fp32 mean cosine", f"{embedder['mean_cosine']:.4f}", ">= 0.99"),
        *((f"embedder {name} int8 (the next run)", f"{other['int8']['sentences_per_s']:.0f} /s",
           "") for name, other in others.items()),
        *signature_rows(run_signature_bench()),
        *run_history_bench(),
        *run_consolidation_bench(),
        *run_consolidation_locomo(),
        *duplicate_rows(),
        *invalidation_rows(),
        *run_retrieval_eval(),
        *run_doc_retrieval_eval(),
        *run_agent_memory_eval(),
        *run_link_eval(),
        *run_ratings_eval(),
        *refusal_rows(),
        *run_auth_bench(),
    ]
    width = 62
    print(f"{'measure':<{width}}  {'value':>16}  target")
    print("-" * (width + 28))
    for name, value, target in rows:
        print(f"{name:<{width}}  {value:>16}  {target}")
    print("\n".join(format_table(pipeline).splitlines()[2:]))
    for name, value, target in [*agent_rows(pipeline["on_corpus"]["agent"]),
                                *pack_rows(pipeline["on_corpus"]["pack"])]:
        print(f"{name:<{width}}  {value:>16}  {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
