"""Run learnings (seed 002 §5.3, step 3): what runs keep teaching, proposed as draft memories.

Two rules, both deterministic functions of the run history, so every worker proposes the same
text under the same id and a replay proposes nothing new:

- a fix pattern whose error was fixed by at least `lesson_min_fixes` distinct runs proposes a
  `lesson`: the error in words, what fixed it, in how many runs, and which;
- a decision or gotcha that recurs (once normalized) in at least `pattern_min_runs` runs of one
  task key proposes a `pattern`: the task, the statement, the runs.

A learning is named by what it is learnt from (the fix pattern; the task key, kind and
normalized statement): it is written once, as a draft, and when the evidence grows the same
memory is updated with the grown text. What a reviewer rejected stays rejected.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from memstream_client.events import (
    MAX_RELATED_IDS,
    MemoryUpdate,
    MemoryUpdatePayload,
    MemoryWrite,
    MemoryWritePayload,
)
from memstream_client.ids import (
    digest_record_id,
    fix_pattern_record_id,
    learning_event_id,
    learning_update_event_id,
    memory_record_id,
)
from processors.runs.fix_patterns import FixPattern, fix_pattern_title
from processors.runs.masking import mask
from processors.text.condense import condense

DEFAULT_LESSON_MIN_FIXES = 3
DEFAULT_PATTERN_MIN_RUNS = 2
# The producer of every learning event: the proposer a reviewer sees in the queue.
LEARNING_PRODUCER = "memstream.run-learnings"
LEARNING_TAG = "run-learning"
# Runs named in a learning's text; the count always says how many there are.
MAX_RUNS_NAMED = 20
TEXT_CHARS = 8000
TITLE_CHARS = 200
STATEMENT_CHARS = 400

StatementKind = Literal["decision", "gotcha"]
# How a digest's gotcha says how it ended: not part of the trouble itself.
_RESOLUTION = re.compile(r";\s*(?:overcome by:.*|unresolved)$", re.IGNORECASE | re.DOTALL)
_FAILED_WITH = re.compile(r"^failed with:\s*", re.IGNORECASE)
_SPACES = re.compile(r"\s+")
_TRAILING = re.compile(r"[\s.!;:,]+$")


@dataclass(frozen=True)
class LearningThresholds:
    """How much evidence a learning needs (MEMSTREAM_LESSON_MIN_FIXES,
    MEMSTREAM_PATTERN_MIN_RUNS)."""

    lesson_min_fixes: int = DEFAULT_LESSON_MIN_FIXES
    pattern_min_runs: int = DEFAULT_PATTERN_MIN_RUNS

    def __post_init__(self) -> None:
        if self.lesson_min_fixes < 1:
            raise ValueError("a lesson needs at least 1 fixing run")
        if self.pattern_min_runs < 2:
            raise ValueError("a pattern recurs: it needs at least 2 runs")


@dataclass(frozen=True)
class ProposedLearning:
    """A learning as the rules state it now; `source` names what it is learnt from."""

    namespace: str
    source: str
    memory_type: Literal["lesson", "pattern"]
    title: str
    text: str
    tags: tuple[str, ...]
    related_ids: tuple[str, ...]
    source_ref: str
    # The runs that are its evidence, oldest first.
    runs: tuple[str, ...]
    # When its latest evidence happened: the time of the events that propose it.
    as_of: datetime

    @property
    def event_id(self) -> str:
        return learning_event_id(self.namespace, self.source)

    @property
    def record_id(self) -> str:
        return memory_record_id(self.namespace, self.event_id)


@dataclass(frozen=True)
class StoredLearning:
    """A learning's memory as stored: what deciding its next event needs."""

    version: int
    review_state: str
    title: str | None
    text: str
    related_ids: tuple[str, ...]


def proposed_lesson(pattern: FixPattern,
                    thresholds: LearningThresholds) -> ProposedLearning | None:
    """The lesson a fix pattern teaches, once enough distinct runs fixed its error."""
    fixes = sorted(pattern.fixes, key=lambda fix: (fix.finished_at, fix.run_id))
    if pattern.success_count < thresholds.lesson_min_fixes or not fixes:
        return None
    signature = pattern.signature
    fix_id = fix_pattern_record_id(pattern.namespace, signature.signature_id)
    runs = tuple(fix.run_id for fix in fixes)
    error = signature.exception_type or "this error"
    lines = [
        f"Lesson: when {error} occurs ({signature.template}), {pattern.success_count} runs "
        "fixed it.",
        "What fixed it:",
        *(condense(f"- run {fix.run_id}: {fix.changes()}", STATEMENT_CHARS) for fix in fixes),
        f"Fixed in {_runs_in_words(pattern.success_count, runs)}.",
        f"Met in {len(pattern.runs)} runs, {pattern.count} times, first"
        f" {pattern.first_seen.date().isoformat()}, last {pattern.last_seen.date().isoformat()}.",
    ]
    if signature.frames:
        lines.insert(1, "Where: " + ", ".join(signature.frames))
    related = [fix_id, *(fix.digest_record_id for fix in reversed(fixes))]
    return ProposedLearning(
        namespace=pattern.namespace,
        source=f"lesson\x1f{fix_id}",
        memory_type="lesson",
        title=condense(f"Lesson: {fix_pattern_title(signature)}", TITLE_CHARS),
        text=condense("\n".join(lines), TEXT_CHARS),
        tags=(LEARNING_TAG, "fix-pattern", signature.dialect),
        related_ids=tuple(dict.fromkeys(related))[:MAX_RELATED_IDS],
        source_ref=f"fix_pattern:{fix_id}",
        runs=runs,
        as_of=fixes[-1].finished_at,
    )


@dataclass(frozen=True)
class RunStatements:
    """What one run's digest holds as decisions and gotchas."""

    run_id: str
    task_key: str
    finished_at: datetime
    decisions: tuple[str, ...]
    gotchas: tuple[str, ...]


def run_statements(digest_body: Mapping[str, Any]) -> RunStatements | None:
    """A digest's decisions and gotchas as its body keeps them; None for a run of no task."""
    task_key = digest_body.get("task_key")
    if not isinstance(task_key, str) or not task_key:
        return None
    return RunStatements(
        run_id=str(digest_body["run_id"]),
        task_key=task_key,
        finished_at=datetime.fromisoformat(str(digest_body["finished_at"])),
        decisions=_texts(digest_body.get("decisions")),
        gotchas=_texts(digest_body.get("gotchas")),
    )


def normalized_statement(kind: StatementKind, text: str) -> str:
    """What makes two runs' statements the same one: case, spacing, final punctuation and the
    variable parts (numbers, hosts, ids: processors/runs/masking.py) aside; for a gotcha, also how
    the run overcame it."""
    if kind == "gotcha":
        text = _FAILED_WITH.sub("", _RESOLUTION.sub("", text.strip()))
    return _TRAILING.sub("", _SPACES.sub(" ", mask(text)).strip().casefold())


def proposed_patterns(namespace: str, runs: Iterable[RunStatements],
                      thresholds: LearningThresholds) -> list[ProposedLearning]:
    """Every pattern the runs of one task key show: a decision or gotcha met in enough of
    them, stated in the words of the first run that met it."""
    ordered = sorted(runs, key=lambda run: (run.finished_at, run.run_id))
    seen: dict[tuple[str, StatementKind, str], list[tuple[RunStatements, str]]] = {}
    for run in ordered:
        sections: tuple[tuple[StatementKind, tuple[str, ...]], ...] = (
            ("decision", run.decisions), ("gotcha", run.gotchas))
        for kind, texts in sections:
            for text in texts:
                key = (run.task_key, kind, normalized_statement(kind, text))
                if key[2] and run.run_id not in {met.run_id for met, _ in seen.get(key, ())}:
                    seen.setdefault(key, []).append((run, text))
    return [_pattern(namespace, task_key, kind, normalized, met)
            for (task_key, kind, normalized), met in sorted(seen.items())
            if len(met) >= thresholds.pattern_min_runs]


def learning_event(learning: ProposedLearning,
                   stored: StoredLearning | None) -> MemoryWrite | MemoryUpdate | None:
    """The event that brings the learning's memory to what the rules state now: its draft
    write when it has none, an update when the evidence grew, nothing when it says so already
    or a reviewer rejected it."""
    if stored is None:
        return MemoryWrite(
            event_id=learning.event_id, namespace=learning.namespace, occurred_at=learning.as_of,
            producer=LEARNING_PRODUCER, type="memory.write",
            payload=MemoryWritePayload(
                text=learning.text, title=learning.title, memory_type=learning.memory_type,
                tags=list(learning.tags), related_ids=list(learning.related_ids),
                review_state="draft", trust_class="derived", source_ref=learning.source_ref,
            ))
    if stored.review_state == "deprecated" or (
        stored.text, stored.title, stored.related_ids,
    ) == (learning.text, learning.title, learning.related_ids):
        return None
    return MemoryUpdate(
        event_id=learning_update_event_id(learning.namespace, learning.source, learning.text),
        namespace=learning.namespace, occurred_at=learning.as_of, producer=LEARNING_PRODUCER,
        type="memory.update",
        payload=MemoryUpdatePayload(
            record_id=learning.record_id, expected_version=stored.version, text=learning.text,
            title=learning.title, related_ids=list(learning.related_ids),
        ))


def _pattern(namespace: str, task_key: str, kind: StatementKind, normalized: str,
             met: Sequence[tuple[RunStatements, str]]) -> ProposedLearning:
    statement = condense(met[0][1] if kind == "decision"
                         else _FAILED_WITH.sub("", _RESOLUTION.sub("", met[0][1].strip())),
                         STATEMENT_CHARS)
    runs = tuple(run.run_id for run, _ in met)
    what = "decided" if kind == "decision" else "ran into"
    text = "\n".join([
        f"Pattern in task {task_key}: runs repeatedly {what}: {statement}",
        f"Recurred in {_runs_in_words(len(runs), runs)}.",
    ])
    # The statement's hash keeps the source (and so the ids) short whatever its length.
    statement_hash = hashlib.sha256(normalized.encode()).hexdigest()[:24]
    related = [digest_record_id(namespace, run_id) for run_id in reversed(runs)]
    return ProposedLearning(
        namespace=namespace,
        source=f"pattern\x1f{task_key}\x1f{kind}\x1f{statement_hash}",
        memory_type="pattern",
        title=condense(f"Pattern ({task_key}, {kind}): {statement}", TITLE_CHARS),
        text=condense(text, TEXT_CHARS),
        tags=(LEARNING_TAG, f"recurring-{kind}"),
        related_ids=tuple(related[:MAX_RELATED_IDS]),
        source_ref=condense(f"task:{task_key}", 1000),
        runs=runs,
        as_of=met[-1][0].finished_at,
    )


def _runs_in_words(count: int, runs: Sequence[str]) -> str:
    named = ", ".join(runs[-MAX_RUNS_NAMED:])
    more = count - min(len(runs), MAX_RUNS_NAMED)
    return f"{count} runs: {named}" + (f" and {more} more" if more > 0 else "")


def _texts(items: Any) -> tuple[str, ...]:
    """The texts of a digest section as its body keeps it (a list of {text, evidence})."""
    if not isinstance(items, list):
        return ()
    return tuple(item["text"] for item in items
                 if isinstance(item, dict) and isinstance(item.get("text"), str))
