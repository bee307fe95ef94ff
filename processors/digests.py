"""Run digests: a deterministic structured summary of one run, built from its events alone.

The same events always give the same digest, whatever order they were delivered in, so a
digest can be rebuilt from the ledger at any time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from processors.condense import approx_tokens, condense
from processors.ids import digest_record_id
from schemas.events import Provenance, RunEvent, RunFinished, RunStarted, RunStep
from schemas.records import Record

MAX_ITEMS = 8
ITEM_CHARS = 240
DIGEST_TOKEN_CAP = 600


@dataclass(frozen=True)
class RunDigest:
    namespace: str
    run_id: str
    intent: str
    outcome: str
    key_changes: tuple[str, ...]
    decisions: tuple[str, ...]
    gotchas: tuple[str, ...]
    next_steps: tuple[str, ...]
    task_key: str | None
    repo: str | None
    commits: tuple[str, ...]
    event_ids: tuple[str, ...]

    def render(self) -> str:
        lines = [
            f"Run {self.run_id}: {self.intent or 'no stated intent'}",
            f"Outcome: {self.outcome}",
        ]
        for heading, items in (
            ("Key changes", self.key_changes),
            ("Decisions", self.decisions),
            ("Gotchas", self.gotchas),
            ("Next steps", self.next_steps),
        ):
            if items:
                lines.append(f"{heading}:")
                lines.extend(f"- {item}" for item in items)
        return _cap_tokens("\n".join(lines), DIGEST_TOKEN_CAP)


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

    outcome: str = end.payload.status
    if end.payload.summary:
        outcome += f" — {condense(end.payload.summary, ITEM_CHARS)}"
    gotchas = [
        condense(f"{step.payload.status}: {step.payload.text}".strip(": "), ITEM_CHARS)
        for step in steps
        if step.payload.kind == "status_change" and _is_trouble(step.payload.status)
    ]
    if end.payload.error:
        gotchas.append(condense(f"failed with: {end.payload.error}", ITEM_CHARS))
    key_changes = [f"commit {commit}" for commit in end.payload.commits]
    if end.payload.files_changed:
        key_changes.append("files: " + condense(", ".join(end.payload.files_changed), ITEM_CHARS))

    return RunDigest(
        namespace=end.namespace,
        run_id=end.payload.run_id,
        intent=condense(started.payload.intent, ITEM_CHARS) if started else "",
        outcome=outcome,
        key_changes=_first(key_changes),
        decisions=_first(
            condense(step.payload.text, ITEM_CHARS)
            for step in steps
            if step.payload.kind == "decision" and step.payload.text
        ),
        gotchas=_first(gotchas),
        next_steps=_first(condense(step, ITEM_CHARS) for step in end.payload.next_steps),
        task_key=started.payload.task_key if started else None,
        repo=started.payload.repo if started else None,
        commits=tuple(end.payload.commits),
        event_ids=tuple(event.event_id for event in ordered),
    )


def digest_record(digest: RunDigest, provenance: Provenance, finished: RunFinished) -> Record:
    """The stored form of a digest: its rendered text is what gets embedded and searched."""
    return Record(
        record_id=digest_record_id(digest.namespace, digest.run_id),
        namespace=digest.namespace,
        record_kind="run_digest",
        title=f"Run {digest.run_id} {finished.payload.status}",
        text=digest.render(),
        body=asdict(digest),
        trust_class="derived",
        source_ref=f"run:{digest.run_id}",
        run_ref=digest.run_id,
        provenance=provenance,
        created_at=finished.occurred_at,
    )


def _is_trouble(status: str | None) -> bool:
    lowered = (status or "").lower()
    return any(word in lowered for word in ("fail", "error", "blocked", "retry", "timeout"))


def _first(items: Iterable[str]) -> tuple[str, ...]:
    """The first distinct non-empty items, at most MAX_ITEMS."""
    return tuple(dict.fromkeys(item for item in items if item))[:MAX_ITEMS]


def _cap_tokens(text: str, cap: int) -> str:
    return text if approx_tokens(text) <= cap else condense(text, cap * 4)
