"""Retrieval of the right chunk of a project's documentation, and ingest speed: the documents
plane measured in one process (docs/retrieval.md, Documents).

    python -m bench.doc_retrieval_eval [--json PATH]

The documentation is HTTPX's `docs/` (bench/data/docs/httpx, BSD-3-Clause; see
bench/data/README.md); the questions (bench/data/docs/httpx-questions.jsonl) were written for
this set, each naming the document and the heading path of the section that answers it. A
chunk answers a question when its doc id and its heading path are those named (a section cut
into several chunks has several chunks that answer): the figures are about finding the right
section, whichever of its chunks comes first.

Ingest is what the document stage does, without Kafka or Postgres: each document chunked
(processors/documents/chunking.py, tokens counted by the model's tokenizer), every chunk embedded
(heading path and text, as the record sink embeds its record) and upserted into the embedded
index engine (the worker's default) with its lexical vector and payload, one document at a
time; chunks per second is over the whole of it.

Then every question is ranked four ways in the same run, over the same chunks:

- hybrid: memstream's search, the dense and lexical lists of the index fused as `/v1/search`
  fuses them (streams/api/search.ranked, the default profile's weights, kind doc_chunk):
  the route's order with no adaptive scores and min_score -1;
- dense: the index's cosine list alone;
- lexical: the index's own sparse (BM25-weighted, stemmed) list alone;
- BM25: Okapi as rank_bm25 computes it over `\\w+` lowercased words of what is embedded
  (bench/retrieval_eval.py's), in this process.

R@1 and R@5: the share of questions with an answering chunk first, in the top 5; MRR: the
mean of 1 / the rank of the first answering chunk (0 past rank 50).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.retrieval_eval import BM25Okapi, ranking, word_tokens
from embedder.model import Embedder
from harness.stack import MODEL_DIR
from memstream_client.events import DocUpsert, Provenance
from processors.documents.chunk_records import chunk_record
from processors.documents.chunking import chunk_document
from processors.recall.ranking import FusionWeights
from processors.text.calibration import calibration_of
from processors.text.embedding import embedding_text
from processors.text.lexical import record_vector
from schemas.records import Record
from stores.index.factory import open_index
from stores.index.payload import index_payload
from stores.index.protocol import IndexPoint, SearchScope, VectorIndex
from streams.reads.search import ranked

DATA = Path(__file__).resolve().parent / "data" / "docs"
DOCS_DIR = DATA / "httpx"
QUESTIONS_FILE = DATA / "httpx-questions.jsonl"
NAMESPACE = "bench-docs"
# Ranks looked at: the first answering chunk past this counts as not found.
DEPTH = 50
RETRIEVERS = ("hybrid", "dense", "lexical", "bm25")


@dataclass(frozen=True)
class Question:
    text: str
    doc_id: str
    heading: str


@dataclass(frozen=True)
class Recall:
    questions: int
    at_1: float
    at_5: float
    mrr: float


@dataclass(frozen=True)
class EvalResult:
    documents: int
    chunks: int
    ingest_s: float
    recall: dict[str, Recall]

    @property
    def chunks_per_s(self) -> float:
        return self.chunks / self.ingest_s


def load_questions(path: Path = QUESTIONS_FILE) -> list[Question]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return [Question(row["question"], row["doc_id"], row["heading"]) for row in rows]


def documents(root: Path = DOCS_DIR) -> list[tuple[str, str]]:
    """(doc id, text) of every Markdown document but the licence, by doc id."""
    return [(path.relative_to(root).as_posix(), path.read_text(encoding="utf-8"))
            for path in sorted(root.rglob("*.md")) if path.name != "LICENSE.md"]


def answers(record: Record, question: Question) -> bool:
    """The rule: the chunk is of the question's document and under its heading path."""
    return record.source_ref == question.doc_id and \
        (record.title or "") == question.heading


def first_rank(ranked_ids: Sequence[str], by_id: Mapping[str, Record],
               question: Question) -> int | None:
    """The rank (from 1) of the first chunk that answers, within DEPTH."""
    for rank, record_id in enumerate(ranked_ids[:DEPTH], start=1):
        if answers(by_id[record_id], question):
            return rank
    return None


def recall_of(ranks: Sequence[int | None]) -> Recall:
    found = [rank for rank in ranks if rank is not None]
    count = len(ranks)
    return Recall(count, sum(rank == 1 for rank in found) / count,
                  sum(rank <= 5 for rank in found) / count,
                  sum(1 / rank for rank in found) / count)


def upsert_event(doc_id: str, text: str) -> DocUpsert:
    return DocUpsert.model_validate({
        "event_id": uuid.uuid4().hex, "type": "doc.upsert", "namespace": NAMESPACE,
        "occurred_at": datetime.now(UTC).isoformat(), "producer": "bench",
        "payload": {"doc_id": doc_id, "text": text, "repo": "encode/httpx"}})


PROVENANCE = Provenance(source_event_id="bench", source_topic="documents.events",
                        source_partition=0, source_offset=0, producer="bench")


async def ingest(index: VectorIndex, embedder: Embedder,
                 docs: Sequence[tuple[str, str]]) -> tuple[list[Record], float]:
    """Chunk, embed and index every document, one at a time; the records and the seconds."""
    records: list[Record] = []
    started = time.perf_counter()
    for doc_id, text in docs:
        event = upsert_event(doc_id, text)
        chunks = chunk_document(doc_id, text, "markdown", embedder.token_costs)
        made = [chunk_record(event, chunk, PROVENANCE) for chunk in chunks]
        vectors = embedder.embed([embedding_text(r.title, r.text) for r in made], role="passage")
        await index.upsert([IndexPoint(r.record_id, vector, index_payload(r.model_dump()),
                                       record_vector(r))
                            for r, vector in zip(made, vectors, strict=True)])
        records += made
    return records, time.perf_counter() - started


async def rankings(index: VectorIndex, embedder: Embedder, records: Sequence[Record],
                   questions: Sequence[Question]) -> dict[str, list[list[str]]]:
    scope = SearchScope(NAMESPACE, DEPTH, -1.0, record_kinds=("doc_chunk",))
    vectors = embedder.embed([q.text for q in questions], role="query")
    bm25 = BM25Okapi([word_tokens(embedding_text(r.title, r.text)) for r in records])
    found: dict[str, list[list[str]]] = {name: [] for name in RETRIEVERS}
    for question, vector in zip(questions, vectors, strict=True):
        fused, _ = await ranked(index, question.text, vector, None, scope,
                                FusionWeights.calibrated(calibration_of(embedder.spec.name)))
        found["hybrid"].append([hit.record_id for hit in fused])
        found["dense"].append([hit.record_id for hit in await index.search(vector, scope)])
        only_lexical = [hit for hit in fused if hit.lexical_rank is not None]
        found["lexical"].append([hit.record_id for hit in sorted(
            only_lexical, key=lambda hit: hit.lexical_rank or 0)])
        found["bm25"].append([records[i].record_id
                              for i in ranking(bm25.scores(word_tokens(question.text)))])
    return found


async def evaluate() -> EvalResult:
    docs = documents()
    questions = load_questions()
    with tempfile.TemporaryDirectory(prefix="memstream-doc-bench-") as tmp, \
            Embedder.load(MODEL_DIR) as embedder:
        index = open_index(f"edge://{Path(tmp) / 'index'}")
        await index.ensure_collection()
        try:
            records, seconds = await ingest(index, embedder, docs)
            by_id = {record.record_id: record for record in records}
            ranks = await rankings(index, embedder, records, questions)
        finally:
            await index.close()
    recall = {name: recall_of([first_rank(ids, by_id, q)
                               for ids, q in zip(ranks[name], questions, strict=True)])
              for name in RETRIEVERS}
    return EvalResult(len(docs), len(records), seconds, recall)


def format_report(result: EvalResult) -> str:
    lines = [f"HTTPX docs: {result.documents} documents, {result.chunks} chunks, "
             f"{result.recall['hybrid'].questions} questions",
             f"ingest (chunk + embed + index): {result.chunks_per_s:.1f} chunks/s "
             f"({result.ingest_s:.1f} s)", "",
             f"{'retriever':<10} {'R@1':>6} {'R@5':>6} {'MRR':>6}"]
    for name in RETRIEVERS:
        r = result.recall[name]
        lines.append(f"{name:<10} {r.at_1:>6.3f} {r.at_5:>6.3f} {r.mrr:>6.3f}")
    return "\n".join(lines)


def as_json(result: EvalResult) -> dict[str, Any]:
    return {"documents": result.documents, "chunks": result.chunks,
            "ingest_s": result.ingest_s, "chunks_per_s": result.chunks_per_s,
            "recall": {name: vars(r) for name, r in result.recall.items()}}


def run_doc_retrieval_eval() -> list[tuple[str, str, str]]:
    """`make bench`'s rows: hybrid R@5, R@1, MRR beside the best baseline's R@5, and the
    ingest rate."""
    result = asyncio.run(evaluate())
    hybrid = result.recall["hybrid"]
    best = max(RETRIEVERS[1:], key=lambda name: result.recall[name].at_5)
    label = f"HTTPX docs, the right chunk ({hybrid.questions} questions)"
    return [
        (f"{label} R@5, hybrid", f"{hybrid.at_5:.3f}",
         f">= {result.recall[best].at_5:.3f} ({best}, same run)"),
        (f"{label} R@1, hybrid", f"{hybrid.at_1:.3f}", ""),
        (f"{label} MRR, hybrid", f"{hybrid.mrr:.3f}", ""),
        (f"documents ingest, chunk + embed + index ({result.chunks} chunks)",
         f"{result.chunks_per_s:.0f} /s", ""),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.doc_retrieval_eval",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, metavar="PATH", help="write every figure here")
    args = parser.parse_args(argv)
    result = asyncio.run(evaluate())
    print(format_report(result))
    if args.json is not None:
        args.json.write_text(json.dumps(as_json(result), indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
