"""Run digests: a deterministic structured summary of one run, built from its events alone.

Every part (intent, outcome, key changes, decisions, gotchas, next steps) carries the evidence
it was drawn from: event ids, commits, pull requests, artifact refs. The same events always
give the same digest, whatever order they were delivered in, so a digest can be rebuilt from
the ledger at any time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime

from pydantic_core import to_jsonable_python

from memstream_client.events import (
    Provenance,
    RunArtifact,
    RunEvent,
    RunFinished,
    RunStarted,
    RunStep,
)
from memstream_client.ids import digest_record_id
from memstream_client.redaction import redact_secrets
from processors.text.condense import approx_tokens, condense
from schemas.records import Record

MAX_ITEMS = 8
ITEM_CHARS = 240
DIGEST_TOKEN_CAP = 600
# Steps that can tell how an error was overcome, when they follow it.
_RESOLVING_KINDS = frozenset({"retry", "decision", "tool_call", "note", "status_change"})


@dataclass(frozen=True)
class DigestItem:
    text: str
    # Event ids, and `commit:`, `pr:` or `artifact:` references.
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class ArtifactRef:
    kind: str
    ref: str
    title: str
    event_id: str


@dataclass(frozen=True)
class RunDigest:
    namespace: str
    run_id: str
    status: str
    intent: DigestItem | None
    outcome: DigestItem
    key_changes: tuple[DigestItem, ...]
    decisions: tuple[DigestItem, ...]
    gotchas: tuple[DigestItem, ...]
    next_steps: tuple[DigestItem, ...]
    task_key: str | None
    repo: str | None
    commits: tuple[str, ...]
    pull_requests: tuple[str, ...]
    files_changed: tuple[str, ...]
    artifacts: tuple[ArtifactRef, ...]
    event_ids: tuple[str, ...]
    started_at: datetime | None
    finished_at: datetime

    def render(self, cap_tokens: int = DIGEST_TOKEN_CAP) -> str:
        """The digest as text within `cap_tokens`: sections lose their last items first, so
        that every section and the evidence line survive as long as possible."""
        for keep in (MAX_ITEMS, 4, 2, 1):
            text = "\n".join((*self._summary_lines(keep), self.evidence_line()))
            if approx_tokens(text) <= cap_tokens:
                return text
        return condense(text, cap_tokens * 4)

    def summary_text(self) -> str:
        """The prose part of the digest, without the evidence line."""
        return "\n".join(self._summary_lines(MAX_ITEMS))

    def evidence_line(self) -> str:
        parts = [f"run {self.run_id}"]
        if self.commits:
            parts.append("commits " + ", ".join(self.commits[:MAX_ITEMS]))
        if self.pull_requests:
            parts.append("PRs " + ", ".join(self.pull_requests[:MAX_ITEMS]))
        if self.artifacts:
            parts.append("artifacts " + ", ".join(a.ref for a in self.artifacts[:MAX_ITEMS]))
        return condense("Evidence: " + "; ".join(parts), ITEM_CHARS * 2)

    def _summary_lines(self, keep: int) -> list[str]:
        intent = self.intent.text if self.intent else "no stated intent"
        lines = [f"Run {self.run_id}: {intent}", f"Outcome: {self.outcome.text}"]
        for heading, items in (
            ("Key changes", self.key_changes),
            ("Decisions", self.decisions),
            ("Gotchas", self.gotchas),
            ("Next steps", self.next_steps),
        ):
            if items:
                lines.append(f"{heading}:")
                lines.extend(f"- {item.text}" for item in items[:keep])
        return lines


class IncompleteRun(ValueError):
    """The ledger lacks the events a digest needs (no run.finished yet)."""


def build_digest(events: Sequence[RunEvent]) -> RunDigest:
    """Summarise one run from all of its events; they must include its run.finished."""
    ordered = sorted(events, key=lambda event: (event.occurred_at, event.event_id))
    finished = [event for event in ordered if isinstance(event, RunFinished)]
    if not finished:
        raise IncompleteRun("a digest needs the run.finished event")
    end = finished[-1]
    started = next((event for event in ordered if isinstance(event, RunStarted)), None)
    steps = [event for event in ordered if isinstance(event, RunStep)]
    artifacts = tuple(
        ArtifactRef(event.payload.kind, event.payload.ref, event.payload.title, event.event_id)
        for event in ordered
        if isinstance(event, RunArtifact)
    )
    result = end.payload
    commit_refs = tuple(f"commit:{commit}" for commit in result.commits)
    pr_refs = tuple(f"pr:{pr}" for pr in result.pull_requests)

    outcome: str = result.status
    if result.summary:
        outcome += f" — {_clean(result.summary, ITEM_CHARS)}"
    intent = (
        DigestItem(_clean(started.payload.intent, ITEM_CHARS), (started.event_id,))
        if started and started.payload.intent
        else None
    )
    return RunDigest(
        namespace=end.namespace,
        run_id=result.run_id,
        status=result.status,
        intent=intent,
        outcome=DigestItem(outcome, (end.event_id, *commit_refs, *pr_refs)),
        key_changes=_first(_key_changes(end, artifacts)),
        decisions=_first(
            DigestItem(_clean(step.payload.text, ITEM_CHARS), (step.event_id,))
            for step in steps
            if step.payload.kind == "decision" and step.payload.text
        ),
        gotchas=_first(_gotchas(steps, end)),
        next_steps=_first(_next_steps(end)),
        task_key=started.payload.task_key if started else None,
        repo=started.payload.repo if started else None,
        commits=tuple(result.commits),
        pull_requests=tuple(result.pull_requests),
        files_changed=tuple(result.files_changed),
        artifacts=artifacts,
        event_ids=tuple(event.event_id for event in ordered),
        started_at=started.occurred_at if started else None,
        finished_at=end.occurred_at,
    )


def error_headline(error: str) -> str:
    """The line of an error text a reader wants first: a Python traceback ends with the
    exception, every other dialect starts with it."""
    lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    if lines[0].startswith("Traceback (most recent call last)"):
        return lines[-1]
    return lines[0]


def digest_record(
    digest: RunDigest, provenance: Provenance, *, rewritten: str | None = None
) -> Record:
    """The stored form of a digest: its text is what gets embedded and searched.

    `rewritten` is prose from the optional LLM hook; the evidence line stays the
    deterministic one, so every digest keeps its links whoever wrote the prose.
    """
    text = f"{rewritten}\n{digest.evidence_line()}" if rewritten else digest.render()
    return Record(
        record_id=digest_record_id(digest.namespace, digest.run_id),
        namespace=digest.namespace,
        record_kind="run_digest",
        title=f"Run {digest.run_id} {digest.status}"
        + (f" ({digest.task_key})" if digest.task_key else ""),
        text=text,
        body={
            **to_jsonable_python(asdict(digest)),
            "text_source": "llm" if rewritten else "deterministic",
        },
        trust_class="derived",
        source_ref=f"run:{digest.run_id}",
        run_ref=digest.run_id,
        repo=digest.repo or None,
        provenance=provenance,
        created_at=digest.finished_at,
    )


def _key_changes(end: RunFinished, artifacts: Sequence[ArtifactRef]) -> Iterable[DigestItem]:
    result = end.payload
    for commit in result.commits:
        yield DigestItem(f"commit {commit}", (end.event_id, f"commit:{commit}"))
    for pr in result.pull_requests:
        yield DigestItem(f"pull request {pr}", (end.event_id, f"pr:{pr}"))
    if result.files_changed:
        yield DigestItem(
            "files: " + _clean(", ".join(result.files_changed), ITEM_CHARS), (end.event_id,)
        )
    for artifact in artifacts:
        if artifact.kind == "patch":
            label = artifact.title or artifact.ref
            yield DigestItem(
                f"patch {label}", (artifact.event_id, f"artifact:{artifact.ref}")
            )


def _gotchas(steps: Sequence[RunStep], end: RunFinished) -> Iterable[DigestItem]:
    """Errors met and trouble reported, each with how it was overcome when the steps after
    it tell (up to the next error)."""
    for index, step in enumerate(steps):
        payload = step.payload
        if payload.kind == "error":
            headline = error_headline(payload.error or payload.text)
            resolution = _resolution(steps[index + 1 :], end)
            evidence: tuple[str, ...] = (step.event_id,)
            if resolution is None:
                text = f"{headline}; unresolved"
            else:
                text = f"{headline}; overcome by: {resolution.text}"
                evidence += resolution.evidence
            yield DigestItem(_clean(text, ITEM_CHARS), evidence)
        elif payload.kind == "status_change" and _is_trouble(payload.status):
            text = f"{payload.status}: {payload.text}".strip(": ")
            yield DigestItem(_clean(text, ITEM_CHARS), (step.event_id,))
    if end.payload.error:
        yield DigestItem(
            _clean(f"failed with: {error_headline(end.payload.error)}", ITEM_CHARS),
            (end.event_id,),
        )


def _resolution(later: Sequence[RunStep], end: RunFinished) -> DigestItem | None:
    for step in later:
        payload = step.payload
        if payload.kind == "error":
            break
        if payload.kind in _RESOLVING_KINDS and not _is_trouble(payload.status):
            what = payload.text or payload.tool or payload.status or ""
            if payload.kind == "retry":
                attempt = f" {payload.attempt}" if payload.attempt else ""
                what = f"retry{attempt}" + (f" ({what})" if what else "")
            if what:
                return DigestItem(_clean(what, ITEM_CHARS // 2), (step.event_id,))
    if end.payload.status == "succeeded":
        return DigestItem("the run went on to succeed", (end.event_id,))
    return None


def _next_steps(end: RunFinished) -> Iterable[DigestItem]:
    for step in end.payload.next_steps:
        yield DigestItem(_clean(step, ITEM_CHARS), (end.event_id,))
    if end.payload.status == "failed" and not end.payload.next_steps and end.payload.error:
        yield DigestItem(
            _clean(f"resolve: {error_headline(end.payload.error)}", ITEM_CHARS),
            (end.event_id,),
        )


def _is_trouble(status: str | None) -> bool:
    lowered = (status or "").lower()
    return any(word in lowered for word in ("fail", "error", "blocked", "retry", "timeout"))


def _first(items: Iterable[DigestItem]) -> tuple[DigestItem, ...]:
    """The first items of distinct text, at most MAX_ITEMS."""
    kept: dict[str, DigestItem] = {}
    for item in items:
        if item.text and item.text not in kept:
            kept[item.text] = item
    return tuple(kept.values())[:MAX_ITEMS]



def _clean(text: str, max_chars: int) -> str:
    """Free text from a run as a digest keeps it: secrets redacted, condensed to fit."""
    return condense(redact_secrets(text).text, max_chars)
