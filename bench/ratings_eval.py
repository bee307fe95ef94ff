"""What ratings buy and what they cannot break (seed 003's adaptive scores), on LoCoMo's
development conversations through the real pipeline.

    python -m bench.ratings_eval

Every turn is a shared memory (as in bench/retrieval_eval.py). Every question is asked on
`/v1/search` (`limit` 10, `min_score` -1, `explain`) by two agents' keys: the rater and a
bystander. The questions where a turn that is not evidence ranks above the first evidence
turn in the top 5 ("a near miss above the answer") are split in two by their order: the
*rated* half and the *unrated* half.

- Three sessions: each asks every rated question as both agents; the rater then rates, in one
  memory.rate, each hit above the first evidence turn "not useful" and that turn "useful".
  The bystander asks the same questions as often, so its accesses are the rater's: the two
  differ only by the ratings.
- Then both ask every near-miss question again. Printed: the share of questions with a near
  miss above the answer, and R@1, before and after, for the rater and the bystander, on
  the rated questions and on the unrated ones (other wordings, mostly about other turns:
  what ratings must not spoil); and how many of the bystander's hits carry a usefulness that
  is not the neutral one (a rating of someone else's reaching it).
- A flood: a third agent sends 1,000 "not useful" ratings (1,000 events) of the answer that
  tops one question for the bystander. Printed: that agent's adaptive score of it (at
  least the floor, 0.35), whether it is still shown to that agent at the route's defaults
  (relevance is a floor ratings never move), and its rank for the bystander (top 5).

About 3 minutes on 2 cores.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.retrieval_eval import (
    Conversation,
    Question,
    load_conversations,
    namespace_of,
    publish,
)
from harness.kafka_io import wait_caught_up
from harness.stack import Stack, Worker
from publisher.kafka_publisher import Publisher
from schemas.topics import MEMORY_EVENTS

SESSIONS = 3
FLOOD = 1000
TOP_K = 10
RATER, BYSTANDER, FLOODER = "rater", "bystander", "flooder"


@dataclass(frozen=True)
class Asked:
    """A question in its conversation's namespace."""

    namespace: str
    question: Question


@dataclass(frozen=True)
class Answer:
    """A search's hits: record ids and source refs in rank order, and their explanations."""

    record_ids: list[str]
    source_refs: list[str]
    explained: list[dict[str, Any]]

    def first_evidence(self, evidence: Sequence[str]) -> int | None:
        """The rank (0-based) of the first evidence turn in the top 5, if any."""
        return next((rank for rank, ref in enumerate(self.source_refs[:5]) if ref in evidence),
                    None)

    def near_miss_above(self, evidence: Sequence[str]) -> bool:
        rank = self.first_evidence(evidence)
        return rank is not None and rank > 0

    def top1(self, evidence: Sequence[str]) -> bool:
        return bool(self.source_refs) and self.source_refs[0] in evidence


@dataclass
class RatingsResult:
    rated: list[Asked] = field(default_factory=list)
    unrated: list[Asked] = field(default_factory=list)
    # Per agent, "before" / "after": one answer per question of rated + unrated.
    answers: dict[tuple[str, str], list[Answer]] = field(default_factory=dict)
    bystander_rated_usefulness: int = 0
    bystander_hits_seen: int = 0
    flood: dict[str, Any] = field(default_factory=dict)
    timings_s: dict[str, float] = field(default_factory=dict)


async def ask(http: httpx.AsyncClient, asked: Asked, **extra: Any) -> Answer:
    params = {"namespace": asked.namespace, "query": asked.question.text, "limit": TOP_K,
              "min_score": -1, "explain": "true", **extra}
    answer = await http.get("/v1/search", params=params)
    answer.raise_for_status()
    hits = answer.json()["hits"]
    return Answer([hit["record_id"] for hit in hits], [hit["source_ref"] for hit in hits],
                  [hit["explain"] for hit in hits])


def key_client(worker: Worker, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=worker.base_url,
                             headers={"Authorization": f"Bearer {key}"}, timeout=30.0)


def near_miss_share(answers: Sequence[Answer], asked: Sequence[Asked]) -> float:
    return sum(a.near_miss_above(q.question.evidence) for a, q in zip(answers, asked,
                                                                      strict=True)) / len(asked)


def recall_at_1(answers: Sequence[Answer], asked: Sequence[Asked]) -> float:
    return sum(a.top1(q.question.evidence) for a, q in zip(answers, asked,
                                                           strict=True)) / len(asked)


async def evaluate(conversations: Sequence[Conversation] | None = None) -> RatingsResult:
    conversations = list(conversations or load_conversations())
    run_id = f"ratings-{uuid.uuid4().hex[:8]}"
    result = RatingsResult()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="memstream-ratings-eval-") as scratch, \
            Stack(Path(scratch)) as stack:
        worker = stack.worker()
        worker.start()
        await publish(stack, run_id, conversations)
        result.timings_s["stack_and_ingest"] = time.perf_counter() - started
        keys = {agent: stack.make_key("--all-namespaces", "--perm", "read,write",
                                      "--agent", agent)
                for agent in (RATER, BYSTANDER, FLOODER)}
        clients = {agent: key_client(worker, key) for agent, key in keys.items()}
        try:
            await rate_and_compare(stack, worker, clients, conversations, run_id, result)
            await flood(stack, worker, clients, result)
        finally:
            for http in clients.values():
                await http.aclose()
    result.timings_s["total"] = time.perf_counter() - started
    return result


async def rate_and_compare(stack: Stack, worker: Worker, clients: dict[str, httpx.AsyncClient],
                           conversations: Sequence[Conversation], run_id: str,
                           result: RatingsResult) -> None:
    everything = [Asked(namespace_of(run_id, c), q) for c in conversations
                  for q in c.questions if q.evidence]
    # What the bystander finds before anyone rated: which questions have a near miss above.
    first = [await ask(clients[BYSTANDER], asked) for asked in everything]
    tempted = [asked for asked, answer in zip(everything, first, strict=True)
               if answer.near_miss_above(asked.question.evidence)]
    result.rated, result.unrated = tempted[0::2], tempted[1::2]
    measured = [*result.rated, *result.unrated]
    for agent in (RATER, BYSTANDER):
        result.answers[agent, "before"] = [await ask(clients[agent], a) for a in measured]

    async with Publisher(stack.broker.bootstrap, producer="bench.ratings_eval") as publisher:
        for _ in range(SESSIONS):
            for asked in result.rated:
                answer = await ask(clients[RATER], asked)
                await ask(clients[BYSTANDER], asked)
                rank = answer.first_evidence(asked.question.evidence)
                if rank is None:
                    continue
                ratings = {record_id: False for record_id in answer.record_ids[:rank]}
                ratings[answer.record_ids[rank]] = True
                await publisher.rate_memories(asked.namespace, RATER, ratings)
    await wait_caught_up(stack.broker.bootstrap, worker.app_id, [MEMORY_EVENTS], 120.0)

    for agent in (RATER, BYSTANDER):
        result.answers[agent, "after"] = [await ask(clients[agent], a) for a in measured]
    for answer in result.answers[BYSTANDER, "after"]:
        for explained in answer.explained:
            result.bystander_hits_seen += 1
            adaptive = explained["adaptive"]
            result.bystander_rated_usefulness += adaptive["usefulness"] != 0.5


async def flood(stack: Stack, worker: Worker, clients: dict[str, httpx.AsyncClient],
                result: RatingsResult) -> None:
    """1,000 "not useful" from the flooder, of the answer that tops the bystander's first
    rated question whose top hit is evidence."""
    target = next((asked, answer) for asked, answer in zip(
        [*result.rated, *result.unrated], result.answers[BYSTANDER, "after"], strict=True)
        if answer.top1(asked.question.evidence))
    asked, bystander_before = target
    memory_id = bystander_before.record_ids[0]
    defaults_before = await clients[FLOODER].get("/v1/search", params={
        "namespace": asked.namespace, "query": asked.question.text})
    async with Publisher(stack.broker.bootstrap, producer="bench.ratings_eval") as publisher:
        for _ in range(FLOOD):
            await publisher.rate_memories(asked.namespace, FLOODER, {memory_id: False})
    await wait_caught_up(stack.broker.bootstrap, worker.app_id, [MEMORY_EVENTS], 180.0)
    scores = (await clients[FLOODER].get("/v1/memory-scores", params={
        "namespace": asked.namespace, "memory_id": memory_id})).json()
    flooder = await ask(clients[FLOODER], asked)
    defaults = (await clients[FLOODER].get("/v1/search", params={
        "namespace": asked.namespace, "query": asked.question.text})).json()
    bystander = await ask(clients[BYSTANDER], asked)
    own = flooder.explained[flooder.record_ids.index(memory_id)]
    result.flood = {
        "valuations": scores["valuation_count"],
        "adaptive": own["adaptive"]["score"],
        "shown_before": memory_id in [h["record_id"] for h in defaults_before.json()["hits"]],
        "shown_after": memory_id in [h["record_id"] for h in defaults["hits"]],
        "flooder_rank": flooder.record_ids.index(memory_id) + 1,
        "bystander_rank": bystander.record_ids.index(memory_id) + 1
        if memory_id in bystander.record_ids else None,
    }


def ratings_rows(result: RatingsResult) -> list[tuple[str, str, str]]:
    """`make bench`'s rows."""
    rows: list[tuple[str, str, str]] = []
    halves = (("rated", result.rated, slice(0, len(result.rated))),
              ("unrated", result.unrated, slice(len(result.rated), None)))
    for name, asked, part in halves:
        for agent in (RATER, BYSTANDER):
            before = result.answers[agent, "before"][part]
            after = result.answers[agent, "after"][part]
            rows.append((
                f"ratings, {name} questions ({len(asked)}), {agent}: near miss above",
                f"{near_miss_share(before, asked):.3f} -> {near_miss_share(after, asked):.3f}",
                target_of(name, agent)))
            rows.append(("  R@1", f"{recall_at_1(before, asked):.3f} -> "
                                   f"{recall_at_1(after, asked):.3f}", ""))
    rows.append(("ratings: bystander hits moved by another's ratings",
                 f"{result.bystander_rated_usefulness} of {result.bystander_hits_seen}", "0"))
    flood = result.flood
    rows += [
        (f"flood of {flood['valuations']} 'not useful': the flooder's adaptive score",
         f"{flood['adaptive']:.3f}", ">= 0.35 (the floor)"),
        ("  still shown to the flooder at the defaults",
         f"{flood['shown_before']} -> {flood['shown_after']}", "True -> True"),
        ("  its rank for the flooder / the bystander (top 10)",
         f"{flood['flooder_rank']} / {flood['bystander_rank']}", "bystander 1"),
    ]
    return rows


def target_of(half: str, agent: str) -> str:
    if agent == BYSTANDER:
        return "unchanged (no ratings of its own)"
    return "< before" if half == "rated" else "not above before + 0.05"


def run_ratings_eval() -> list[tuple[str, str, str]]:
    return ratings_rows(asyncio.run(evaluate()))


def main() -> int:
    result = asyncio.run(evaluate())
    width = 66
    for name, value, target in ratings_rows(result):
        print(f"{name:<{width}}  {value:>16}  {target}")
    print("timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in result.timings_s.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
