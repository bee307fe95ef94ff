"""Whether a restatement folded into its twin is still found by its own words (issue 37).

    python -m bench.restatement_words [--json PATH]

A write that restates a live memory becomes a version of it (processors/memory/twins.py): the
twin keeps its text and the write's text is kept in its body (`restatements`). This measures
whether search finds the twin by the words only the folded write held.

Every memory of bench/data/consolidation_eval.jsonl goes through the real pipeline (a broker,
Postgres and one worker with the defaults: twins on at their threshold, stale facts on), in
the file's order, into one namespace. A write the worker folds is announced as an `updated`
version of its twin with the write's event id as its cause. For each write folded into a
member of its own group (a true restatement), the query is made of the words only the write
holds: its terms (processors.text.lexical.terms: stop words out, light stems) that the twin's
text lacks, each as the write spells it, in the write's order; a write with none is not
asked. Each query is asked on `/v1/search` twice, with `limit=5`: nothing cut by relevance
(`min_score=-1`), and at the route's default `min_score`. R@5: the share of queries whose
twin is among the hits. A twin invalidated meanwhile (it left recall) is not asked, and
counted apart.
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
from typing import Any

import httpx

from bench.consolidation_eval import EvalMemory, load_eval_set
from bench.retrieval_eval import search
from harness.kafka_io import Received, TopicReader, produce
from harness.stack import Stack
from memstream_client.ids import memory_record_id
from processors.text.lexical import STOP_WORDS, stem, terms, tokens
from schemas.topics import MEMORY_EVENTS, MEMORY_UPDATED

LIMIT = 5
ANNOUNCE_TIMEOUT_S = 300.0
# Time for the stale-fact finder to reach the last writes (a tick is 0.5 s), so that a twin
# that a later memory invalidates is seen to leave recall before it is asked for.
SETTLE_S = 5.0
NAMESPACE = "restated"


@dataclass(frozen=True)
class Folded:
    write: EvalMemory
    twin: EvalMemory
    query: str


@dataclass(frozen=True)
class Asked:
    folded: Folded
    # The hits' record ids, nothing cut; and at the route's default min_score.
    all_hits: list[str]
    default_hits: list[str]


def own_words(write: str, twin: str) -> str:
    """The words of `write` whose terms `twin` lacks, as `write` spells them, in its order."""
    theirs = set(terms(twin))
    words = [word for word in tokens(write)
             if word not in STOP_WORDS and stem(word) not in theirs]
    return " ".join(dict.fromkeys(words))


def event_id(memory: EvalMemory) -> str:
    return f"{NAMESPACE}:{memory.memory_id}"


def write_event(memory: EvalMemory) -> bytes:
    return json.dumps({
        "event_id": event_id(memory), "type": "memory.write", "namespace": NAMESPACE,
        "occurred_at": datetime(2026, 11, 1, tzinfo=UTC).isoformat(), "producer": "bench",
        "payload": {"text": memory.text, "memory_type": memory.memory_type},
    }).encode()


def _announced(messages: Sequence[Received]) -> list[dict[str, Any]]:
    return [json.loads(message.value) for message in messages]


def folds_of(memories: Sequence[EvalMemory],
             announced: Sequence[Mapping[str, Any]]) -> tuple[dict[str, str], set[str]]:
    """Each folded write's memory id -> its twin's; and the memories that left recall."""
    by_record = {memory_record_id(NAMESPACE, event_id(memory)): memory.memory_id
                 for memory in memories}
    by_event = {event_id(memory): memory.memory_id for memory in memories}
    folded: dict[str, str] = {}
    gone: set[str] = set()
    for change in announced:
        record = by_record.get(change["record_id"])
        if record is None:
            continue
        if change["change"] == "updated" and change.get("cause_event_id") in by_event:
            folded[by_event[change["cause_event_id"]]] = record
        elif change["change"] in ("invalidated", "superseded", "deprecated", "expired"):
            gone.add(record)
    return folded, gone


def _done(memories: Sequence[EvalMemory]) -> Callable[[list[Received]], bool]:
    """Whether every write is stored: created as its own record, or folded into a twin."""
    events = {event_id(memory) for memory in memories}

    def done(messages: list[Received]) -> bool:
        created, causes = set(), set()
        for change in _announced(messages):
            if change["change"] == "created":
                created.add(change["record_id"])
            elif change["change"] == "updated":
                causes.add(change.get("cause_event_id"))
        return all(memory_record_id(NAMESPACE, event) in created or event in causes
                   for event in events)
    return done


async def run(memories: Sequence[EvalMemory]) -> tuple[list[Asked], int, int]:
    """Asked queries, and how many folded writes had no words of their own or a twin gone."""
    by_id = {memory.memory_id: memory for memory in memories}
    with tempfile.TemporaryDirectory(prefix="memstream-restatement-words-") as scratch, \
            Stack(Path(scratch)) as stack:
        worker = stack.worker()
        worker.start()
        async with TopicReader(stack.broker.bootstrap, MEMORY_UPDATED) as updates:
            await produce(stack.broker.bootstrap, MEMORY_EVENTS,
                          [(NAMESPACE.encode(), write_event(memory)) for memory in memories])
            await updates.wait_for(_done(memories), ANNOUNCE_TIMEOUT_S)
            await asyncio.sleep(SETTLE_S)
            folded, gone = folds_of(memories, _announced(updates.messages))
        pairs = [Folded(by_id[write], by_id[twin], own_words(by_id[write].text,
                                                             by_id[twin].text))
                 for write, twin in folded.items()
                 if by_id[write].group is not None and by_id[write].group == by_id[twin].group]
        wordless = sum(not pair.query for pair in pairs)
        left = sum(bool(pair.query) and pair.twin.memory_id in gone for pair in pairs)
        asked: list[Asked] = []
        async with httpx.AsyncClient(base_url=worker.base_url, headers=worker.headers,
                                     timeout=30) as client:
            for pair in pairs:
                if not pair.query or pair.twin.memory_id in gone:
                    continue
                every = await search(client, NAMESPACE, pair.query,
                                     extra={"limit": LIMIT, "min_score": -1}, defaults=True)
                default = await search(client, NAMESPACE, pair.query, defaults=True,
                                       extra={"limit": LIMIT})
                asked.append(Asked(pair, [hit["record_id"] for hit in every["hits"]],
                                   [hit["record_id"] for hit in default["hits"]]))
    return asked, wordless, left


def report(asked: Sequence[Asked], wordless: int, left: int) -> dict[str, Any]:
    def twin_id(item: Asked) -> str:
        return memory_record_id(NAMESPACE, event_id(item.folded.twin))

    found_all = sum(twin_id(item) in item.all_hits for item in asked)
    found_default = sum(twin_id(item) in item.default_hits for item in asked)
    return {
        "asked": len(asked), "folded_without_words_of_their_own": wordless,
        "twin_left_recall": left,
        "r_at_5_min_score_off": found_all / len(asked) if asked else 0.0,
        "r_at_5_default_min_score": found_default / len(asked) if asked else 0.0,
        "queries": [{"write": item.folded.write.memory_id, "twin": item.folded.twin.memory_id,
                     "query": item.folded.query,
                     "found_min_score_off": twin_id(item) in item.all_hits,
                     "found_default": twin_id(item) in item.default_hits} for item in asked],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.restatement_words",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, metavar="PATH", help="write every figure here")
    args = parser.parse_args(argv)
    asked, wordless, left = asyncio.run(run(load_eval_set()))
    result = report(asked, wordless, left)
    print(f"true restatements folded and asked by their own words: {result['asked']} "
          f"(folded with no word of their own: {wordless}; twin left recall: {left})")
    print(f"R@5, min_score=-1 (nothing cut): {result['r_at_5_min_score_off']:.3f}")
    print(f"R@5, default min_score:          {result['r_at_5_default_min_score']:.3f}")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
