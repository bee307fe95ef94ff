"""Evidence recall of `GET /v1/search` on LoCoMo's development conversations, beside baselines
computed in the same run on exactly the same turns and questions.

    python -m bench.retrieval_eval [--json PATH]

bench/data/locomo-dev.json (3 conversations, see bench/data/README.md) goes through the real
pipeline: a broker, Postgres and one worker are started, every dialog turn is published to
memory.events as one memory.write (namespace: the conversation's sample_id behind this run's id,
text "speaker: text" plus "[shares a photo of <blip_caption>]" when the turn shows one,
occurred_at: the session's date, source_ref: the turn's dia_id, thread: the session), in
conversation order. Once every memory is announced on memory.updated (an announcement follows
the index upsert, so the memory is searchable), each question of categories 1-4 is asked over
HTTP (`limit=10`, `min_score=-1`: nothing is cut by relevance) and the hits' source_refs, in
rank order, are scored against the question's evidence turns:

- R@k any-evidence: the share of questions with at least one evidence turn in the top k;
- R@k evidence-recall: the share of a question's evidence turns in the top k, averaged;

for k = 1, 5, 10, overall and per category (1 multi-hop, 2 temporal, 3 open-domain,
4 single-hop). A question whose evidence names no existing turn is not scored; the output says
how many.

Then the threshold that says "nothing here": every question is asked again with the route's
defaults (`limit` 5, `min_score` 0.5), in its own conversation's namespace (R@5 at the defaults)
and in the next conversation's (a foreign namespace, where its evidence cannot be: the share
of those answered with nothing). A table puts `min_score` as a floor on the hits' relevance
(what the product applies) beside a floor on their cosine similarity (what it applied before),
at several settings, computed from the `min_score=-1` answers (both figures come with every
hit); the defaults' row is measured by the route itself.

The baselines run in this process, each ranking the turns of the question's conversation:

- dense: the project's int8 embedder, cosine;
- BM25: Okapi as rank_bm25 computes it (k1 1.5, b 0.75, epsilon 0.25), `\\w+` lowercased;
- BM25 + dense fused by reciprocal rank fusion (k 60) over the full rankings;
- context BM25 3:1 dense: BM25 over the content tokens (STOP_WORDS dropped, `crude_stem`
  applied) of each turn together with the turn before it in its session, fused with dense by
  RRF weighted 3 (BM25) to 1 (dense).

About 50 s on 2 cores: 15 s to start the stack and the worker, 10 s to ingest, 15 s of
questions, 7 s of baselines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt

from embedder.model import Embedder
from embedder.models import MODELS, ModelSpec, model_dir
from harness.kafka_io import TopicReader, produce
from harness.stack import MODEL, Stack, Worker
from memstream_client.events import MemoryWrite
from schemas.topics import MEMORY_EVENTS, MEMORY_UPDATED

DATA_FILE = Path(__file__).parent / "data" / "locomo-dev.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (1, 5, 10)
TOP_K = max(KS)
RRF_K = 60

# The floors of the threshold table; the route's default min_score.
COSINE_FLOORS = (0.2, 0.25, 0.3, 0.35, 0.4, 0.5)
RELEVANCE_FLOORS = (0.3, 0.4, 0.5, 0.6, 0.7)
DEFAULT_MIN_SCORE = 0.5

PRODUCT = "product (/v1/search)"
# The same search by a key bound to an agent that rated nothing: the adaptive scores blended
# in, from the accesses its own earlier questions logged (processors/recall/adaptive_scoring.py).
PRODUCT_SCORED = "product, agent scoring"
# The same search following the best hits' links and shared entities (processors/
# memory_graph.py): one hop, and the anchor profile's two.
PRODUCT_LINKED = "product, links 1 hop"
PRODUCT_ANCHOR = "product, anchor profile (2 hops)"
EXPANSIONS: dict[str, dict[str, str | int]] = {PRODUCT_LINKED: {"expand": 1},
                                               PRODUCT_ANCHOR: {"profile": "anchor"}}
EVAL_AGENT = "eval-agent"
DENSE = "dense (the model alone, cosine)"
BM25 = "BM25 (\\w+ tokens)"
BM25_DENSE = "BM25 + dense, RRF"
CONTEXT_BM25_DENSE = "context BM25 3:1 dense, RRF"
BASELINES = (DENSE, BM25, BM25_DENSE, CONTEXT_BM25_DENSE)

Scores = npt.NDArray[np.float64]

# NLTK's English stop words: function words, auxiliaries, question words and the fragments
# `\w+` leaves of contractions ("don't" -> "don", "t"). They match every turn and question
# alike, so they only add noise to term overlap.
STOP_WORDS = frozenset({
    "i", "me", "my", "myself", "we", "our", "ours", "ourselves", "you", "your",
    "yours", "yourself", "yourselves", "he", "him", "his", "himself", "she", "her", "hers",
    "herself", "it", "its", "itself", "they", "them", "their", "theirs", "themselves", "what",
    "which", "who", "whom", "this", "that", "these", "those", "am", "is", "are", "was", "were",
    "be", "been", "being", "have", "has", "had", "having", "do", "does", "did", "doing", "a", "an",
    "the", "and", "but", "if", "or", "because", "as", "until", "while", "of", "at", "by", "for",
    "with", "about", "against", "between", "into", "through", "during", "before", "after", "above",
    "below", "to", "from", "up", "down", "in", "out", "on", "off", "over", "under", "again",
    "further", "then", "once", "here", "there", "when", "where", "why", "how", "all", "any",
    "both", "each", "few", "more", "most", "other", "some", "such", "no", "nor", "not", "only",
    "own", "same", "so", "than", "too", "very", "s", "t", "can", "will", "just", "don", "should",
    "now", "d", "ll", "m", "o", "re", "ve", "y", "ain", "aren", "couldn", "didn", "doesn", "hadn",
    "hasn", "haven", "isn", "ma", "mightn", "mustn", "needn", "shan", "shouldn", "wasn", "weren",
    "won", "wouldn",
})

# Inflection endings, longest first; one is stripped, only when 3 letters remain.
_SUFFIXES = ("ings", "ing", "edly", "ed", "ies", "es", "ly", "s")


@dataclass(frozen=True)
class Turn:
    dia_id: str
    session: int
    text: str  # as the memory says it: "speaker: text [shares a photo of ...]"
    occurred_at: datetime


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]  # existing turns only, in the order the data names them
    unusable_evidence: tuple[str, ...]


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]  # categories 1-4 only
    skipped_adversarial: int  # category 5: no evidence to retrieve
    combined_evidence_entries: int = 0  # entries naming several turns ("D8:6; D9:17")


@dataclass(frozen=True)
class Recall:
    questions: int
    any_evidence: dict[int, float]
    evidence_recall: dict[int, float]

    def as_json(self) -> dict[str, Any]:
        return {"questions": self.questions,
                "any_evidence": {f"R@{k}": v for k, v in self.any_evidence.items()},
                "evidence_recall": {f"R@{k}": v for k, v in self.evidence_recall.items()}}


@dataclass(frozen=True)
class ScoredHit:
    """A hit as the threshold table needs it: its turn and both figures a floor may use."""

    source_ref: str
    similarity: float
    relevance: float


@dataclass(frozen=True)
class ThresholdRow:
    floor: str  # "relevance" or "cosine"
    min_score: float
    recall_at_5: float  # any evidence, own namespace
    foreign_empty: float  # share of foreign questions answered with nothing
    default: bool = False


@dataclass
class EvalResult:
    run_id: str
    conversations: list[Conversation]
    # The embedding model of the worker and of the dense baseline.
    model: str = MODEL.name
    # Per retriever, per scored question (conversation order, then question order): top 10.
    rankings: dict[str, list[list[str]]] = field(default_factory=dict)
    # The product's answers with nothing cut (min_score=-1), per scored question: in its own
    # conversation's namespace and in the next conversation's.
    home_hits: list[list[ScoredHit]] = field(default_factory=list)
    foreign_hits: list[list[ScoredHit]] = field(default_factory=list)
    # The product's answers at the route's defaults, likewise.
    default_rankings: list[list[str]] = field(default_factory=list)
    foreign_default_hits: list[int] = field(default_factory=list)
    degraded_answers: int = 0
    timings_s: dict[str, float] = field(default_factory=dict)

    def scored_questions(self) -> list[Question]:
        return [q for c in self.conversations for q in c.questions if q.evidence]

    def recall(self, retriever: str) -> dict[str, Recall]:
        """Overall ("all") and per category name."""
        return recall_by_category(self.scored_questions(), self.rankings[retriever])

    def thresholds(self) -> list[ThresholdRow]:
        """The threshold table: each floor at several settings, then the defaults' row as
        the route answered it."""
        questions = self.scored_questions()
        rows = [threshold_row(questions, self.home_hits, self.foreign_hits, floor, value)
                for floor, values in (("cosine", COSINE_FLOORS),
                                      ("relevance", RELEVANCE_FLOORS))
                for value in values]
        return [*rows, ThresholdRow(
            "relevance", DEFAULT_MIN_SCORE, self.default_recall_at_5(),
            sum(count == 0 for count in self.foreign_default_hits)
            / len(self.foreign_default_hits), default=True)]

    def default_recall_at_5(self) -> float:
        return recall(self.scored_questions(), self.default_rankings).any_evidence[5]

    def best_baseline(self) -> str:
        def key(name: str) -> tuple[float, float]:
            overall = self.recall(name)["all"]
            return overall.any_evidence[5], overall.any_evidence[10]
        return max(BASELINES, key=key)


# ------------------------------------------------------------------------- the data

_SESSION_TIME = re.compile(
    r"\s*(\d{1,2}):(\d{2})\s*([ap])\.?m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*", re.I)
_MONTHS = {name: number for number, name in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september",
     "october", "november", "december"], 1)}


def parse_session_time(raw: str) -> datetime:
    """"1:56 pm on 8 May, 2023" as an aware UTC datetime (the data gives no zone); parsed by
    hand rather than with strptime's %B and %p, which follow the locale."""
    match = _SESSION_TIME.fullmatch(raw)
    if match is None:
        raise ValueError(f"unrecognised session time {raw!r}")
    hour, minute, half, day, month_name, year = match.groups()
    month = _MONTHS.get(month_name.lower()) or next(
        (n for name, n in _MONTHS.items() if len(month_name) >= 3
         and name.startswith(month_name.lower())), None)
    if month is None or not 1 <= int(hour) <= 12:
        raise ValueError(f"unrecognised session time {raw!r}")
    hour_24 = int(hour) % 12 + (12 if half.lower() == "p" else 0)
    return datetime(int(year), month, int(day), hour_24, int(minute), tzinfo=UTC)


def memory_text(turn: Mapping[str, Any]) -> str:
    """The memory of one dialog turn. Of the image fields only `blip_caption` (what a
    captioning model saw) is used: `query` is the search term the data set's authors used to
    find the picture, which no speaker said, and `img_url` and `re-download` carry no text."""
    text = f"{turn['speaker']}: {turn['text']}"
    caption = str(turn.get("blip_caption") or "").strip()
    return f"{text} [shares a photo of {caption}]" if caption else text


def parse_evidence(raw: Sequence[str], known: Container[str]) -> tuple[list[str], list[str]]:
    """The usable evidence turn ids, in order and without repeats, and the unusable pieces.

    Some entries hold several ids ("D8:6; D9:17") or stray spaces ("D8: 6"); an id that names
    no turn of the conversation cannot be retrieved and is unusable."""
    usable: list[str] = []
    unusable: list[str] = []
    for entry in raw:
        for piece in re.split(r"[;,]", entry):
            dia_id = re.sub(r"\s+", "", piece)
            if not dia_id:
                continue
            if dia_id not in known:
                unusable.append(piece.strip())
            elif dia_id not in usable:
                usable.append(dia_id)
    return usable, unusable


def _session_numbers(conversation: Mapping[str, Any]) -> list[int]:
    # Some files list session_N_date_time for sessions that hold no turns: only lists count.
    return sorted(int(match[1]) for key, value in conversation.items()
                  if (match := re.fullmatch(r"session_(\d+)", key)) and isinstance(value, list))


def load_conversations(path: Path = DATA_FILE) -> list[Conversation]:
    conversations: list[Conversation] = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        dialog = sample["conversation"]
        turns = tuple(
            Turn(turn["dia_id"], number, memory_text(turn),
                 parse_session_time(dialog[f"session_{number}_date_time"]))
            for number in _session_numbers(dialog) for turn in dialog[f"session_{number}"])
        known = {turn.dia_id for turn in turns}
        questions: list[Question] = []
        combined = 0
        for qa in sample["qa"]:
            if qa["category"] not in CATEGORIES:
                continue
            combined += sum(1 for entry in qa.get("evidence") or [] if re.search(r"[;,]", entry))
            usable, unusable = parse_evidence(qa.get("evidence") or [], known)
            questions.append(Question(qa["question"], qa["category"], tuple(usable),
                                      tuple(unusable)))
        conversations.append(Conversation(
            sample["sample_id"], turns, tuple(questions),
            sum(1 for qa in sample["qa"] if qa["category"] not in CATEGORIES), combined))
    return conversations


# ------------------------------------------------------------------------- metrics

def any_evidence_at(ranked: Sequence[str], evidence: Sequence[str], k: int) -> float:
    return 1.0 if set(ranked[:k]) & set(evidence) else 0.0


def evidence_recall_at(ranked: Sequence[str], evidence: Sequence[str], k: int) -> float:
    return len(set(ranked[:k]) & set(evidence)) / len(set(evidence))


def recall(questions: Sequence[Question], rankings: Sequence[Sequence[str]]) -> Recall:
    if len(questions) != len(rankings):
        raise ValueError(f"{len(questions)} questions but {len(rankings)} rankings")
    if not questions:
        return Recall(0, {k: math.nan for k in KS}, {k: math.nan for k in KS})
    pairs = list(zip(questions, rankings, strict=True))
    return Recall(
        len(questions),
        {k: sum(any_evidence_at(r, q.evidence, k) for q, r in pairs) / len(pairs) for k in KS},
        {k: sum(evidence_recall_at(r, q.evidence, k) for q, r in pairs) / len(pairs)
         for k in KS})


def recall_by_category(questions: Sequence[Question],
                       rankings: Sequence[Sequence[str]]) -> dict[str, Recall]:
    by_category: dict[str, Recall] = {"all": recall(questions, rankings)}
    for category, name in CATEGORIES.items():
        chosen = [i for i, q in enumerate(questions) if q.category == category]
        by_category[name] = recall([questions[i] for i in chosen], [rankings[i] for i in chosen])
    return by_category


def kept(hits: Sequence[ScoredHit], floor: str, min_score: float) -> list[str]:
    """The turns a floor on `floor` ("relevance" or "cosine") at `min_score` shows, in rank
    order, at most 5 (the route's default limit)."""
    return list(dict.fromkeys(
        hit.source_ref for hit in hits
        if (hit.relevance if floor == "relevance" else hit.similarity) >= min_score))[:5]


def threshold_row(questions: Sequence[Question], home: Sequence[Sequence[ScoredHit]],
                  foreign: Sequence[Sequence[ScoredHit]], floor: str,
                  min_score: float) -> ThresholdRow:
    """R@5 in the questions' own namespaces and the share of foreign questions answered with
    nothing, for one floor."""
    shown_home = [kept(hits, floor, min_score) for hits in home]
    return ThresholdRow(
        floor, min_score,
        sum(any_evidence_at(r, q.evidence, 5) for q, r in zip(questions, shown_home,
                                                               strict=True)) / len(questions),
        sum(not kept(hits, floor, min_score) for hits in foreign) / len(foreign))


# ------------------------------------------------------------------------- baselines

def word_tokens(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def crude_stem(word: str) -> str:
    """A few of Porter's steps, crudely: one inflection ending off ("-ies" becomes "-y",
    "-es" only after a sibilant, "-s" not after "s"), then a doubled final consonant undone
    and a final "e" dropped, so that "paintings", "painted" and "paints" all become "paint",
    "running" "run", "baked" and "bake" "bak", "classes" "class", "stories" "story". Words of
    3 letters or fewer stay as they are; over-stemming is harmless as long as the question and
    the turns are stemmed alike."""
    stem = word
    for suffix in _SUFFIXES:
        if not word.endswith(suffix) or len(word) - len(suffix) < 3:
            continue
        base = word[: -len(suffix)]
        if suffix == "es" and not base.endswith(("s", "x", "z", "ch", "sh")):
            continue
        if suffix == "s" and base.endswith("s"):
            break
        stem = base + ("y" if suffix == "ies" else "")
        break
    if len(stem) > 3 and stem[-1] == stem[-2] and stem[-1] not in "aeioulsz":
        stem = stem[:-1]
    if len(stem) > 3 and stem.endswith("e"):
        stem = stem[:-1]
    return stem


def content_tokens(text: str) -> list[str]:
    return [crude_stem(word) for word in word_tokens(text) if word not in STOP_WORDS]


class BM25Okapi:
    """rank_bm25's BM25Okapi: a term in more than half the documents has a negative IDF, which
    is replaced by `epsilon` times the mean IDF; a query term counts once per occurrence."""

    def __init__(self, documents: Sequence[Sequence[str]], k1: float = 1.5, b: float = 0.75,
                 epsilon: float = 0.25) -> None:
        if not documents:
            raise ValueError("BM25 needs at least one document")
        self.k1 = k1
        self.size = len(documents)
        lengths = np.array([len(document) for document in documents], dtype=np.float64)
        average_length = lengths.sum() / self.size or 1.0
        self._length_norm = k1 * (1 - b + b * lengths / average_length)
        frequencies: dict[str, dict[int, int]] = defaultdict(dict)
        for position, document in enumerate(documents):
            for term, count in Counter(document).items():
                frequencies[term][position] = count
        self._postings = {term: (np.fromiter(docs.keys(), dtype=np.int64),
                                 np.fromiter(docs.values(), dtype=np.float64))
                          for term, docs in frequencies.items()}
        self.idf = {term: math.log(self.size - len(docs) + 0.5) - math.log(len(docs) + 0.5)
                    for term, docs in frequencies.items()}
        floor = epsilon * sum(self.idf.values()) / len(self.idf) if self.idf else 0.0
        self.idf = {term: idf if idf >= 0 else floor for term, idf in self.idf.items()}

    def scores(self, query: Sequence[str]) -> Scores:
        scores = np.zeros(self.size, dtype=np.float64)
        for term in query:
            if term not in self._postings:
                continue
            documents, counts = self._postings[term]
            scores[documents] += self.idf[term] * counts * (self.k1 + 1) / (
                counts + self._length_norm[documents])
        return scores


def ranking(scores: Scores) -> list[int]:
    """Positions by descending score; ties keep conversation order."""
    return [int(i) for i in np.argsort(-scores, kind="stable")]


def reciprocal_rank_fusion(rankings: Sequence[Sequence[int]],
                           weights: Sequence[float] | None = None, k: int = RRF_K) -> list[int]:
    """Weighted RRF over full rankings: sum of weight / (k + rank), ranks from 1."""
    weights = weights or [1.0] * len(rankings)
    fused: dict[int, float] = defaultdict(float)
    for ranked, weight in zip(rankings, weights, strict=True):
        for rank, position in enumerate(ranked, 1):
            fused[position] += weight / (k + rank)
    return sorted(fused, key=lambda position: (-fused[position], position))


def with_previous_turn(turns: Sequence[Turn]) -> list[str]:
    """Each turn's text preceded by the turn before it in the same session, if any."""
    return [f"{turns[i - 1].text} {turn.text}"
            if i > 0 and turns[i - 1].session == turn.session else turn.text
            for i, turn in enumerate(turns)]


def baseline_rankings(conversations: Sequence[Conversation],
                      embedder: Embedder) -> dict[str, list[list[str]]]:
    rankings: dict[str, list[list[str]]] = {name: [] for name in BASELINES}
    for conversation in conversations:
        turns = conversation.turns
        questions = [q for q in conversation.questions if q.evidence]
        if not questions:
            continue
        turn_vectors = embedder.embed([turn.text for turn in turns], role="passage")
        question_vectors = embedder.embed([q.text for q in questions], role="query")
        plain = BM25Okapi([word_tokens(turn.text) for turn in turns])
        in_context = BM25Okapi([content_tokens(text) for text in with_previous_turn(turns)])
        for question, vector in zip(questions, question_vectors, strict=True):
            dense = ranking((turn_vectors @ vector).astype(np.float64))
            lexical = ranking(plain.scores(word_tokens(question.text)))
            contextual = ranking(in_context.scores(content_tokens(question.text)))
            for name, order in (
                (DENSE, dense),
                (BM25, lexical),
                (BM25_DENSE, reciprocal_rank_fusion([lexical, dense])),
                (CONTEXT_BM25_DENSE, reciprocal_rank_fusion([contextual, dense], [3.0, 1.0])),
            ):
                rankings[name].append([turns[i].dia_id for i in order[:TOP_K]])
    return rankings


# ------------------------------------------------------------------------- the product

def namespace_of(run_id: str, conversation: Conversation) -> str:
    return f"{run_id}-{conversation.sample_id}"


def memory_write(run_id: str, conversation: Conversation, turn: Turn) -> bytes:
    namespace = namespace_of(run_id, conversation)
    event = {
        # dia_ids repeat across conversations: the namespace (run id + sample_id) tells them
        # apart.
        "event_id": f"{namespace}:{turn.dia_id}",
        "type": "memory.write", "namespace": namespace,
        "occurred_at": turn.occurred_at.isoformat(), "producer": "bench.retrieval_eval",
        "payload": {"text": turn.text, "memory_type": "fact", "source_ref": turn.dia_id,
                    "thread": f"{conversation.sample_id}:session_{turn.session}"},
    }
    # A contract change (a field renamed or dropped) fails here, not as a dead letter.
    MemoryWrite.model_validate(event)
    return json.dumps(event).encode()


async def publish(stack: Stack, run_id: str, conversations: Sequence[Conversation],
                  timeout_s: float = 300.0) -> None:
    """Publish every turn in conversation order and wait until each is announced."""
    namespaces = {namespace_of(run_id, c) for c in conversations}
    expected = sum(len(c.turns) for c in conversations)

    def announced(messages: Sequence[Any]) -> int:
        return len({body["record_id"] for body in (json.loads(m.value) for m in messages)
                    if body.get("namespace") in namespaces
                    and body.get("record_kind") == "memory"})

    async with TopicReader(stack.broker.bootstrap, MEMORY_UPDATED) as updates:
        await produce(stack.broker.bootstrap, MEMORY_EVENTS, [
            (namespace_of(run_id, c).encode(), memory_write(run_id, c, turn))
            for c in conversations for turn in c.turns])
        try:
            await updates.wait_for(lambda m: announced(m) >= expected, timeout_s=timeout_s)
        except TimeoutError:
            raise TimeoutError(
                f"{announced(updates.messages)} of {expected} memories announced after "
                f"{timeout_s:.0f} s; see the worker's log and memory.events.dlq") from None


async def search(client: httpx.AsyncClient, namespace: str, query: str,
                 *, defaults: bool = False,
                 extra: Mapping[str, str | int] | None = None) -> dict[str, Any]:
    """The route's answer with nothing cut by relevance (top 10), or at its defaults; `extra`:
    more parameters."""
    params: dict[str, str | int] = {"namespace": namespace, "query": query, **(extra or {})}
    if not defaults:
        params |= {"limit": TOP_K, "min_score": -1}
    # One retry: a worker busy indexing (or restarting) may drop a connection or answer 5xx;
    # a 4xx is our mistake and fails at once.
    for attempt in (1, 2):
        try:
            answer = await client.get("/v1/search", params=params)
            if answer.status_code < 500 or attempt == 2:
                answer.raise_for_status()
                body: dict[str, Any] = answer.json()
                return body
        except httpx.TransportError:
            if attempt == 2:
                raise
        await asyncio.sleep(1.0)
    raise AssertionError("unreachable")


def scored_hits(body: Mapping[str, Any]) -> list[ScoredHit]:
    """An answer's hits, a turn once, at its best rank."""
    seen: dict[str, ScoredHit] = {}
    for hit in body["hits"]:
        ref = hit.get("source_ref")
        if ref and ref not in seen:
            seen[ref] = ScoredHit(ref, float(hit["similarity"]), float(hit["relevance"]))
    return list(seen.values())[:TOP_K]


async def ask_questions(stack: Stack, worker: Worker, result: EvalResult) -> None:
    """Every scored question in its own namespace and in the next conversation's, with
    nothing cut and at the defaults; then in its own namespace with nothing cut, by a key
    bound to an agent, whose recalls blend the adaptive scores of its earlier ones."""
    conversations = result.conversations
    agent_key = stack.make_key("--all-namespaces", "--perm", "read", "--agent", EVAL_AGENT)
    scored: list[list[str]] = []
    expanded: dict[str, list[list[str]]] = {name: [] for name in EXPANSIONS}
    async with httpx.AsyncClient(base_url=worker.base_url, headers=worker.headers,
                                 timeout=30.0) as client, \
            httpx.AsyncClient(base_url=worker.base_url,
                              headers={"Authorization": f"Bearer {agent_key}"},
                              timeout=30.0) as agent:
        for position, conversation in enumerate(conversations):
            home = namespace_of(result.run_id, conversation)
            foreign = namespace_of(result.run_id,
                                   conversations[(position + 1) % len(conversations)])
            for question in conversation.questions:
                if not question.evidence:
                    continue
                answers = [await search(client, namespace, question.text, defaults=defaults)
                           for namespace in (home, foreign) for defaults in (False, True)]
                result.degraded_answers += sum(bool(a.get("degraded")) for a in answers)
                result.home_hits.append(scored_hits(answers[0]))
                result.default_rankings.append([h.source_ref for h in scored_hits(answers[1])])
                result.foreign_hits.append(scored_hits(answers[2]))
                result.foreign_default_hits.append(len(answers[3]["hits"]))
                scored.append([h.source_ref for h in scored_hits(
                    await search(agent, home, question.text))])
                for name, params in EXPANSIONS.items():
                    expanded[name].append([h.source_ref for h in scored_hits(
                        await search(client, home, question.text, extra=params))])
    result.rankings[PRODUCT] = [[h.source_ref for h in hits] for hits in result.home_hits]
    result.rankings[PRODUCT_SCORED] = scored
    result.rankings.update(expanded)


async def evaluate(data: Path = DATA_FILE, model: ModelSpec = MODEL) -> EvalResult:
    result = EvalResult(f"eval-{uuid.uuid4().hex[:8]}", load_conversations(data))
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="memstream-retrieval-eval-") as scratch, \
            Stack(Path(scratch)) as stack:
        worker = stack.worker(MEMSTREAM_MODEL=model.name)
        worker.start()
        result.timings_s["stack_and_worker_start"] = time.perf_counter() - started
        mark = time.perf_counter()
        await publish(stack, result.run_id, result.conversations)
        result.timings_s["publish_until_announced"] = time.perf_counter() - mark
        mark = time.perf_counter()
        await ask_questions(stack, worker, result)
        result.timings_s["product_questions"] = time.perf_counter() - mark
    mark = time.perf_counter()
    with Embedder.load(model_dir(model.name)) as embedder:
        result.rankings.update(baseline_rankings(result.conversations, embedder))
    result.timings_s["baselines"] = time.perf_counter() - mark
    result.timings_s["total"] = time.perf_counter() - started
    return result


# ------------------------------------------------------------------------- output

def data_summary(conversations: Sequence[Conversation]) -> dict[str, Any]:
    questions = [q for c in conversations for q in c.questions]
    return {
        "conversations": [c.sample_id for c in conversations],
        "turns": sum(len(c.turns) for c in conversations),
        "questions_category_1_to_4": len(questions),
        "questions_scored": sum(1 for q in questions if q.evidence),
        "questions_without_usable_evidence": sum(1 for q in questions if not q.evidence),
        "questions_category_5_skipped": sum(c.skipped_adversarial for c in conversations),
        "evidence_turns": sum(len(q.evidence) for q in questions),
        "evidence_entries_naming_several_turns": sum(
            c.combined_evidence_entries for c in conversations),
        "unusable_evidence_ids": [u for q in questions for u in q.unusable_evidence],
    }


_LABEL_WIDTH = 32


def _row(label: str, cells: Sequence[str]) -> str:
    return (f"{label:<{_LABEL_WIDTH}}  " + "  ".join(f"{c:>5}" for c in cells[:3]) + "   "
            + "  ".join(f"{c:>5}" for c in cells[3:])).rstrip()


def _table(title: str, rows: Sequence[tuple[str, Recall]]) -> list[str]:
    header = _row(title, [f"R@{k}" for k in KS] * 2)
    lines = [f"{'':<{_LABEL_WIDTH}}  {'any evidence':<19}   evidence recall", header,
             "-" * len(header)]
    for label, figures in rows:
        lines.append(_row(label, [f"{figures.any_evidence[k]:.3f}" for k in KS]
                          + [f"{figures.evidence_recall[k]:.3f}" for k in KS]))
    return lines


def _threshold_table(rows: Sequence[ThresholdRow]) -> list[str]:
    lines = ["min_score as a floor on the hits' relevance (the product) or their cosine "
             "similarity (before)",
             f"{'floor':<34}{'min_score':>10}{'R@5':>8}{'foreign answered empty':>24}",
             "-" * 76]
    for row in rows:
        label = "relevance (the route's defaults)" if row.default else row.floor
        lines.append(f"{label:<34}{row.min_score:>10.2f}{row.recall_at_5:>8.3f}"
                     f"{row.foreign_empty:>24.3f}")
    return lines


def format_report(result: EvalResult) -> str:
    summary = data_summary(result.conversations)
    unusable = summary["unusable_evidence_ids"]
    lines = [
        f"LoCoMo dev: {', '.join(summary['conversations'])}, {summary['turns']} turns; "
        f"embedding model {result.model}",
        f"questions: {summary['questions_scored']} scored of the "
        f"{summary['questions_category_1_to_4']} of categories 1-4 "
        f"({summary['questions_without_usable_evidence']} have no usable evidence), "
        f"{summary['questions_category_5_skipped']} of category 5 skipped",
        f"evidence: {summary['evidence_turns']} turns; entries naming several turns (split): "
        f"{summary['evidence_entries_naming_several_turns']}; ids naming no turn (unusable): "
        f"{len(unusable)}" + (f" {unusable}" if unusable else ""),
        f"run {result.run_id}: {result.degraded_answers} search answers degraded; "
        + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in result.timings_s.items()),
        "",
        *_table("retriever", [(name, result.recall(name)["all"])
                              for name in (PRODUCT, PRODUCT_SCORED, *EXPANSIONS,
                                           *BASELINES)]),
    ]
    lines += ["", *_threshold_table(result.thresholds())]
    for name in (PRODUCT, *EXPANSIONS, result.best_baseline()):
        lines += ["", f"{name}, per category", *_table("category", [
            (f"{category} ({figures.questions})", figures)
            for category, figures in result.recall(name).items()])]
    return "\n".join(lines)


def as_json(result: EvalResult) -> dict[str, Any]:
    return {
        "run_id": result.run_id,
        "model": result.model,
        "data": data_summary(result.conversations),
        "degraded_answers": result.degraded_answers,
        "timings_s": result.timings_s,
        "best_baseline": result.best_baseline(),
        "thresholds": [{"floor": row.floor, "min_score": row.min_score,
                        "recall_at_5": row.recall_at_5, "foreign_empty": row.foreign_empty,
                        "default": row.default} for row in result.thresholds()],
        "retrievers": {name: {category: figures.as_json()
                              for category, figures in result.recall(name).items()}
                       for name in (PRODUCT, PRODUCT_SCORED, *EXPANSIONS, *BASELINES)},
    }


def run_retrieval_eval() -> list[tuple[str, str, str]]:
    """`make bench`'s rows: the product's R@k (any evidence) and the best baseline's, with
    the default model; then each other model's, through the same pipeline at its own
    calibration (processors/text/calibration.py), side by side."""
    rows: list[tuple[str, str, str]] = []
    for model in (MODEL, *(m for m in MODELS.values() if m != MODEL)):
        result = asyncio.run(evaluate(model=model))
        product = result.recall(PRODUCT)["all"]
        defaults = result.thresholds()[-1]
        label = (f"LoCoMo dev, {model.name}, /v1/search ({product.questions} questions), "
                 "any evidence")
        rows += [
            (f"{label} R@5, at the defaults", f"{defaults.recall_at_5:.3f}",
             f">= {product.any_evidence[5] - 0.01:.3f} (min_score=-1 - 0.01)"),
            ("  same questions in another namespace: answered with nothing",
             f"{defaults.foreign_empty:.3f}", ">= 0.5"),
            (f"{label} R@1", f"{product.any_evidence[1]:.3f}", ""),
            (f"{label} R@5", f"{product.any_evidence[5]:.3f}", ">= 0.72"),
            (f"{label} R@10", f"{product.any_evidence[10]:.3f}", ">= 0.80"),
        ]
        if model != MODEL:
            continue
        scored = result.recall(PRODUCT_SCORED)["all"]
        best = result.best_baseline()
        baseline = result.recall(best)["all"]
        rows += [
            (f"  {PRODUCT_SCORED} R@5", f"{scored.any_evidence[5]:.3f}",
             f"= {product.any_evidence[5]:.3f} ± 0.01 (scoring off)"),
            (f"  same run, {best} R@5", f"{baseline.any_evidence[5]:.3f}", ""),
            (f"  same run, {best} R@10", f"{baseline.any_evidence[10]:.3f}", ""),
        ]
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.retrieval_eval", description=__doc__,
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
