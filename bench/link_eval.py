"""What following links buys on linked agent memories (bench/data/linked_memories.json): six
small projects, each an anchor page `Project: <Name>` whose wiki-links (or related ids) lead
to component pages, whose wiki-links and related ids lead to facts that name neither; a few
facts tied to a component only by a host, topic or service both name; distractors of other
systems on the same topics. Each question names a project or a component; `hops` says how
far its answer lies from the memory that names that subject (0: the answer names it).

    python -m bench.link_eval [--json PATH] [--namespace NAME]

The memories go through the real pipeline (wiki-links in the text as written, `related` as
`related_ids`, published in waves so that every related id names a record already written);
each question is asked on `/v1/search` three ways, all with `limit=5` and the route's default
`min_score`: as it is, with `expand=1`, and with `profile=anchor` (two hops). Printed: R@1
and R@5 (any answer within the top k), overall and by hops, for each way; by the class of
links that lead to the answer; and what expansion costs the direct questions (`hops` 0) whose
answer it pushed down.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, get_args

import httpx

from bench.retrieval_eval import search
from harness.kafka_io import Received, TopicReader, produce
from harness.stack import Stack
from memstream_client.events import MemoryType
from memstream_client.ids import memory_record_id
from memstream_client.links import wiki_links
from processors.knowledge.entities import entity_key
from schemas.topics import MEMORY_EVENTS, MEMORY_UPDATED

DATA_FILE = Path(__file__).parent / "data" / "linked_memories.json"
KS = (1, 5)
HOPS = (0, 1, 2)
LIMIT = 5
DEFAULT = "default"
EXPAND_1 = "expand=1"
ANCHOR = "profile=anchor"
# The ways each question is asked: the route's defaults (limit 5, min_score 0.5), then the
# same following one hop from the three best hits, and the anchor profile's two.
WAYS: dict[str, dict[str, str | int]] = {DEFAULT: {}, EXPAND_1: {"expand": 1},
                                         ANCHOR: {"profile": "anchor"}}
EXPANDED = (EXPAND_1, ANCHOR)
MEMORY_TYPES = frozenset(get_args(MemoryType))
ANNOUNCE_TIMEOUT_S = 120.0
# The stack is new for each run, so one namespace serves every run and the record ids (by
# which equal scores are ordered) are the same each time: the figures repeat.
NAMESPACE = "links"


# ---------------------------------------------------------------------------- the data


def load(path: Path = DATA_FILE) -> dict[str, Any]:
    """The data file, checked: unique keys and titles, known memory types, every answer and
    related key a memory of the set, every wiki-link a title of the set, hops 0 to 2, no
    related cycle. Raises ValueError naming every problem."""
    data: dict[str, Any] = json.loads(path.read_text())
    problems = problems_of(data)
    if problems:
        raise ValueError(f"{path}: " + "; ".join(problems))
    return data


def problems_of(data: Mapping[str, Any]) -> list[str]:
    problems = [f"missing {field!r}" for field in ("about", "memories", "questions")
                if field not in data]
    if problems:
        return problems
    keys: set[str] = set()
    titles: set[str] = set()
    for memory in data["memories"]:
        key = memory.get("key")
        if not isinstance(key, str) or not key:
            problems.append(f"a memory without a key: {memory!r}")
            continue
        if key in keys:
            problems.append(f"key {key!r} twice")
        keys.add(key)
        if not isinstance(memory.get("text"), str) or not memory["text"].strip():
            problems.append(f"{key}: no text")
        if memory.get("type") not in MEMORY_TYPES:
            problems.append(f"{key}: type {memory.get('type')!r} is no memory type")
        if (title := memory.get("title")) is not None:
            if _title_key(title) in titles:
                problems.append(f"{key}: title {title!r} twice")
            titles.add(_title_key(title))
    for memory in data["memories"]:
        for related in memory.get("related", []):
            if related not in keys:
                problems.append(f"{memory.get('key')}: related key {related!r} unknown")
            if related == memory.get("key"):
                problems.append(f"{related}: relates to itself")
        for link in wiki_links(str(memory.get("text", ""))):
            if _title_key(link) not in titles:
                problems.append(f"{memory.get('key')}: [[{link}]] names no title")
    for number, question in enumerate(data["questions"], 1):
        if not isinstance(question.get("question"), str) or not question["question"].strip():
            problems.append(f"question {number}: no text")
        answers = question.get("answers")
        if not answers:
            problems.append(f"question {number}: no answers")
        for answer in answers or []:
            if answer not in keys:
                problems.append(f"question {number}: answer {answer!r} unknown")
        if question.get("hops") not in HOPS:
            problems.append(f"question {number}: hops {question.get('hops')!r} not in 0..2")
        if not isinstance(question.get("class"), str) or not question["class"]:
            problems.append(f"question {number}: no class")
    if not problems:
        try:
            waves(data["memories"])
        except ValueError as exc:
            problems.append(str(exc))
    return problems


def _title_key(title: str) -> str:
    """A title as a wiki-link resolves to it: by the entity the link and the title name
    (stores/entities.py), so case, spacing, a plural and a typed prefix aside."""
    return entity_key(title)


def waves(memories: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """The keys in publishing waves: each memory after every memory it relates to (a write
    that names an id not yet written is dead-lettered), in the file's order within a wave.
    Raises ValueError on a cycle."""
    related = {memory["key"]: list(memory.get("related", [])) for memory in memories}
    wave_of: dict[str, int] = {}
    while len(wave_of) < len(related):
        ready = {key: 1 + max((wave_of[target] for target in targets), default=-1)
                 for key, targets in related.items()
                 if key not in wave_of and all(target in wave_of for target in targets)}
        if not ready:
            raise ValueError("related ids form a cycle among: " + ", ".join(
                key for key in related if key not in wave_of))
        wave_of |= ready
    return [[key for key in related if wave_of[key] == wave]
            for wave in range(max(wave_of.values(), default=-1) + 1)]


# ---------------------------------------------------------------------------- the figures


def first_rank(ranking: Sequence[str], answers: Sequence[str]) -> int | None:
    """The rank (1-based) of the first answer in `ranking`, or None."""
    for position, key in enumerate(ranking, 1):
        if key in answers:
            return position
    return None


def recall(rankings: Sequence[Sequence[str]], questions: Sequence[Mapping[str, Any]],
           k: int) -> float:
    """The share of questions with any answer within the top k (0 for no questions)."""
    if not questions:
        return 0.0
    found = [(rank := first_rank(ranked, q["answers"])) is not None and rank <= k
             for q, ranked in zip(questions, rankings, strict=True)]
    return sum(found) / len(found)


def figures(rankings: Sequence[Sequence[str]],
            questions: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """R@k overall, by hops and by class."""
    def part(chosen: Sequence[int]) -> dict[str, Any]:
        picked_q = [questions[n] for n in chosen]
        picked_r = [rankings[n] for n in chosen]
        return {"questions": len(chosen),
                **{f"R@{k}": recall(picked_r, picked_q, k) for k in KS}}

    every = range(len(questions))
    classes = sorted({q["class"] for q in questions})
    return {"overall": part(every),
            "by_hops": {str(hops): part([n for n in every if questions[n]["hops"] == hops])
                        for hops in HOPS},
            "by_class": {name: part([n for n in every if questions[n]["class"] == name])
                         for name in classes}}


def pushed_down(base: Sequence[Sequence[str]], expanded: Sequence[Sequence[str]],
                questions: Sequence[Mapping[str, Any]], k: int, hops: int = 0) -> dict[str, Any]:
    """Among the questions of `hops`, those whose answer was within the top k before
    expansion and is not after: what expansion costs them."""
    lost = []
    asked = 0
    for question, before, after in zip(questions, base, expanded, strict=True):
        if question["hops"] != hops:
            continue
        asked += 1
        rank_before = first_rank(before, question["answers"])
        rank_after = first_rank(after, question["answers"])
        if rank_before is not None and rank_before <= k and (
                rank_after is None or rank_after > k):
            lost.append(question["question"])
    return {"questions": asked, "worse": len(lost),
            "share": len(lost) / asked if asked else 0.0, "which": lost}


def rank_changes(base: Sequence[Sequence[str]], expanded: Sequence[Sequence[str]],
                 questions: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """By hops, how many questions' first answer ranks higher (`better`) or lower (`worse`)
    after expansion than before; an answer not shown ranks below every shown one."""
    changes = {str(hops): {"better": 0, "worse": 0, "same": 0} for hops in HOPS}
    for question, before, after in zip(questions, base, expanded, strict=True):
        unseen = max(len(before), len(after)) + 1
        rank_before = first_rank(before, question["answers"]) or unseen
        rank_after = first_rank(after, question["answers"]) or unseen
        moved = "better" if rank_after < rank_before else \
            "worse" if rank_after > rank_before else "same"
        changes[str(question["hops"])][moved] += 1
    return changes


# ---------------------------------------------------------------------------- the run


@dataclass(frozen=True)
class Answered:
    """One question asked one way: the keys of the hits in rank order, and for each, its
    score and the hops it was reached by (None for a hit of the search itself)."""

    keys: list[str]
    scores: list[float]
    via_hops: list[int | None]


@dataclass
class Run:
    answers: dict[str, list[Answered]]
    # Changes other than `created` announced for the set's records while it was written
    # (a twin folded, a fact found stale): the set is not as written.
    write_changes: dict[str, list[str]]
    namespace: str


def events_of(data: Mapping[str, Any], run: str, namespace: str) -> dict[str, bytes]:
    """Each memory's `memory.write`, by key: the title when it has one, its related keys
    as the record ids they will have."""
    def record_id(key: str) -> str:
        return memory_record_id(namespace, f"{run}:{key}")

    events = {}
    for memory in data["memories"]:
        payload: dict[str, Any] = {"text": memory["text"], "memory_type": memory["type"]}
        if memory.get("title"):
            payload["title"] = memory["title"]
        if memory.get("related"):
            payload["related_ids"] = [record_id(key) for key in memory["related"]]
        events[memory["key"]] = json.dumps({
            "event_id": f"{run}:{memory['key']}", "type": "memory.write",
            "namespace": namespace,
            "occurred_at": datetime(2026, 11, 1, tzinfo=UTC).isoformat(), "producer": "bench",
            "payload": payload,
        }).encode()
    return events


def _announced(messages: Sequence[Received]) -> list[dict[str, Any]]:
    return [json.loads(message.value) for message in messages]


def all_announced(wanted: set[str]) -> Callable[[list[Received]], bool]:
    def done(messages: list[Received]) -> bool:
        return wanted <= {announced["record_id"] for announced in _announced(messages)}
    return done


async def run_questions(data: Mapping[str, Any], namespace: str = NAMESPACE) -> Run:
    run = namespace
    events = events_of(data, run, namespace)
    ids = {key: memory_record_id(namespace, f"{run}:{key}") for key in events}
    keys = {record_id: key for key, record_id in ids.items()}
    answers: dict[str, list[Answered]] = {way: [] for way in WAYS}
    with tempfile.TemporaryDirectory(prefix="memstream-link-eval-") as scratch, \
            Stack(Path(scratch)) as stack:
        worker = stack.worker()
        worker.start()
        async with TopicReader(stack.broker.bootstrap, MEMORY_UPDATED) as updates:
            for wave in waves(data["memories"]):
                await produce(stack.broker.bootstrap, MEMORY_EVENTS,
                              [(namespace.encode(), events[key]) for key in wave])
                wanted = {ids[key] for key in wave}
                try:
                    await updates.wait_for(all_announced(wanted), ANNOUNCE_TIMEOUT_S)
                except TimeoutError:
                    seen = {a["record_id"] for a in _announced(updates.messages)}
                    missing = sorted(keys[i] for i in wanted - seen)
                    raise TimeoutError(
                        f"not announced after {ANNOUNCE_TIMEOUT_S:.0f} s: {', '.join(missing)}"
                        "; see the worker's log and memory.events.dlq") from None
            changes: dict[str, list[str]] = {}
            for announced in _announced(updates.messages):
                if announced["record_id"] in keys and announced["change"] != "created":
                    changes.setdefault(keys[announced["record_id"]], []).append(
                        announced["change"])
        async with httpx.AsyncClient(base_url=worker.base_url, headers=worker.headers,
                                     timeout=30) as client:
            for question in data["questions"]:
                for way, extra in WAYS.items():
                    body = await search(client, namespace, question["question"],
                                        defaults=True, extra={"limit": LIMIT, **extra})
                    hits = body["hits"]
                    answers[way].append(Answered(
                        [keys.get(hit["record_id"], hit["record_id"]) for hit in hits],
                        [float(hit["score"]) for hit in hits],
                        [None if hit.get("via") is None else int(hit["via"]["hops"])
                         for hit in hits]))
    return Run(answers, changes, namespace)


def report(data: Mapping[str, Any], run: Run) -> dict[str, Any]:
    """Every figure of a run, and every question's answers."""
    questions = data["questions"]
    rankings = {way: [answered.keys for answered in run.answers[way]] for way in WAYS}
    by_way = {way: figures(rankings[way], questions) for way in WAYS}
    cost = {way: {f"R@{k}": pushed_down(rankings[DEFAULT], rankings[way], questions, k)
                  for k in KS} for way in EXPANDED}
    moved = {way: rank_changes(rankings[DEFAULT], rankings[way], questions)
             for way in EXPANDED}
    # How often the answer shown first among the top 5 was one a link reached.
    via_answers = {}
    for way in EXPANDED:
        reached = 0
        for question, answered in zip(questions, run.answers[way], strict=True):
            rank = first_rank(answered.keys[:LIMIT], question["answers"])
            if rank is not None and answered.via_hops[rank - 1] is not None:
                reached += 1
        via_answers[way] = reached
    return {
        "data": str(DATA_FILE.relative_to(DATA_FILE.parents[2])), "namespace": run.namespace,
        "memories": len(data["memories"]), "questions": len(questions),
        "limit": LIMIT, "ways": {way: dict(extra) for way, extra in WAYS.items()},
        "figures": by_way, "hops0_pushed_down": cost, "rank_changes": moved,
        "answers_reached_by_a_link": via_answers,
        "changes_at_write": run.write_changes,
        "per_question": [
            {**question, **{way: {"hits": run.answers[way][n].keys,
                                  "scores": run.answers[way][n].scores,
                                  "via_hops": run.answers[way][n].via_hops,
                                  "answer_rank": first_rank(run.answers[way][n].keys,
                                                            question["answers"])}
                            for way in WAYS}}
            for n, question in enumerate(questions)],
    }


def evaluate(data_file: Path = DATA_FILE, namespace: str = NAMESPACE) -> dict[str, Any]:
    data = load(data_file)
    return report(data, asyncio.run(run_questions(data, namespace)))


def table(result: Mapping[str, Any]) -> str:
    figures_of = result["figures"]
    counts = figures_of[DEFAULT]
    hops_heads = [f"hops {h} ({counts['by_hops'][str(h)]['questions']})" for h in HOPS]
    lines = [f"{result['memories']} memories, {result['questions']} questions, "
             f"/v1/search limit={result['limit']}, default min_score", "",
             f"{'way':<16}{'all':>14}" + "".join(f"{head:>14}" for head in hops_heads),
             f"{'':<16}" + f"{'R@1   R@5':>14}" * (1 + len(HOPS))]
    for way, fig in figures_of.items():
        cells = [fig["overall"], *(fig["by_hops"][str(h)] for h in HOPS)]
        lines.append(f"{way:<16}" + "".join(f"{cell['R@1']:>8.3f} {cell['R@5']:.3f}"
                                            for cell in cells))
    lines += ["", f"{'R@5 by class':<20}" + "".join(f"{way:>16}" for way in WAYS)]
    for name, part in counts["by_class"].items():
        label = f"{name} ({part['questions']})"
        lines.append(f"{label:<20}" + "".join(
            f"{figures_of[way]['by_class'][name]['R@5']:>16.3f}" for way in WAYS))
    lines.append("")
    for way, cost in result["hops0_pushed_down"].items():
        at1, at5 = cost["R@1"], cost["R@5"]
        lines.append(f"hops-0 questions worse with {way}: R@1 {at1['worse']}/"
                     f"{at1['questions']} ({at1['share']:.3f}), R@5 {at5['worse']}/"
                     f"{at5['questions']} ({at5['share']:.3f})")
    for way, moved in result["rank_changes"].items():
        lines.append(f"answer rank vs default with {way} (better/worse, by hops): " + ", ".join(
            f"{hops}: {changes['better']}/{changes['worse']}"
            for hops, changes in moved.items()))
    for way, reached in result["answers_reached_by_a_link"].items():
        lines.append(f"questions whose first answer in the top {result['limit']} a link "
                     f"reached, {way}: {reached}")
    if result["changes_at_write"]:
        lines.append("changed while written (not as the set says): " + ", ".join(
            f"{key} {'/'.join(changes)}" for key, changes in result["changes_at_write"].items()))
    return "\n".join(lines)


def run_link_eval() -> list[tuple[str, str, str]]:
    """`make bench`'s rows."""
    result = evaluate()
    fig = result["figures"]
    name = f"linked memories ({result['questions']} q), /v1/search R@5"
    return [(name, f"{fig[DEFAULT]['overall']['R@5']:.3f}", ""),
            ("  same, expand=1 R@5", f"{fig[EXPAND_1]['overall']['R@5']:.3f}", ""),
            ("  same, anchor profile (2 hops) R@5", f"{fig[ANCHOR]['overall']['R@5']:.3f}", "")]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.link_eval", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument("--namespace", default=NAMESPACE,
                        help="another namespace gives other record ids, so equal scores "
                             "fall in another order (default: %(default)s)")
    args = parser.parse_args(argv)
    result = evaluate(namespace=args.namespace)
    print(table(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
