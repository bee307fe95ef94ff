"""Fix patterns: procedural memory keyed by error signature, backed by evidence runs.

An error met in a run (a run.step of kind error, or a failed run.finished with its error) is
an occurrence of its signature. A run that met signature S is fixed by the first run that
succeeded after it with the same task_key (or, when it has none, in the same repo within a
window), or by itself when it went on to succeed. The fix pattern of S is rebuilt whole from
its occurrences and the runs around them, so the same facts give the same record whatever
order they arrived in, and a replay changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from memstream_client.events import MAX_RELATED_IDS, Provenance, RunEvent, RunFinished, RunStep
from memstream_client.ids import digest_record_id, fix_pattern_record_id
from memstream_client.redaction import redact_secrets
from processors.runs.signatures import ErrorSignature, signature_of
from processors.text.condense import condense
from schemas.records import Record

MAX_FIXES = 10
MAX_RUNS_LISTED = 20
EXAMPLE_CHARS = 600
DEFAULT_FIX_WINDOW = timedelta(hours=24)

Origin = Literal["step", "finished"]


@dataclass(frozen=True)
class ErrorOccurrence:
    event_id: str
    namespace: str
    run_id: str
    origin: Origin
    occurred_at: datetime
    signature: ErrorSignature
    # The error as met, redacted of secrets and condensed: the pattern's example.
    message: str
    provenance: Provenance


@dataclass(frozen=True)
class RunFacts:
    """What a fix needs to know of one run; `key_changes` come from its digest."""

    run_id: str
    task_key: str | None
    repo: str | None
    status: str | None
    finished_at: datetime | None
    commits: tuple[str, ...] = ()
    pull_requests: tuple[str, ...] = ()
    files_changed: tuple[str, ...] = ()
    key_changes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Fix:
    run_id: str
    digest_record_id: str
    task_key: str | None
    repo: str | None
    finished_at: datetime
    # The failing runs this one succeeded after (itself, when it recovered on its own).
    after_runs: tuple[str, ...]
    commits: tuple[str, ...]
    pull_requests: tuple[str, ...]
    files_changed: tuple[str, ...]
    key_changes: tuple[str, ...]

    def changes(self) -> str:
        """What the run changed, in words: its digest's key changes, else its commits, pull
        requests and files."""
        what = [*self.key_changes] or [
            *(f"commit {c}" for c in self.commits),
            *(f"pull request {p}" for p in self.pull_requests),
        ]
        if self.files_changed and not self.key_changes:
            what.append("files: " + ", ".join(self.files_changed))
        return "; ".join(what) if what else "no recorded changes"


@dataclass(frozen=True)
class FixPattern:
    namespace: str
    signature: ErrorSignature
    example: str
    count: int
    first_seen: datetime
    last_seen: datetime
    runs: tuple[str, ...]
    # Of the latest occurrence: the event that last changed the pattern's facts.
    provenance: Provenance
    fixes: tuple[Fix, ...] = ()
    success_count: int = 0

    def playbook(self) -> str:
        sig = self.signature
        lines = [
            f"When {sig.exception_type or 'this error'} occurs: {sig.template}",
            f"Seen {self.count} times in {len(self.runs)} runs, first {_day(self.first_seen)},"
            f" last {_day(self.last_seen)}.",
        ]
        if sig.frames:
            lines.append("Where: " + ", ".join(sig.frames))
        if not self.fixes:
            lines.append("No fix recorded yet: no run has succeeded after it.")
            return "\n".join(lines)
        lines.append(f"What worked ({self.success_count} successful runs):")
        for fix in self.fixes:
            after = (
                "recovered within the run"
                if fix.after_runs == (fix.run_id,)
                else "after " + ", ".join(fix.after_runs)
            )
            lines.append(condense(f"- run {fix.run_id} ({after}): {fix.changes()}", 400))
        return "\n".join(lines)


def error_occurrences(event: RunEvent, provenance: Provenance) -> list[ErrorOccurrence]:
    """The errors an event reports: an error step, or a failed run's error."""
    origin: Origin
    if isinstance(event, RunStep) and event.payload.kind == "error":
        text, origin = event.payload.error or event.payload.text, "step"
    elif (
        isinstance(event, RunFinished)
        and event.payload.status == "failed"
        and event.payload.error
    ):
        text, origin = event.payload.error, "finished"
    else:
        return []
    redacted = redact_secrets(text).text
    return [
        ErrorOccurrence(
            event_id=event.event_id,
            namespace=event.namespace,
            run_id=event.payload.run_id,
            origin=origin,
            occurred_at=event.occurred_at,
            signature=error_signature(redacted),
            message=condense(redacted, EXAMPLE_CHARS),
            provenance=provenance,
        )
    ]


def error_signature(error: str) -> ErrorSignature:
    """The signature of an error as fix patterns key it: of its text with secrets redacted,
    as stored, so that looking up the raw error finds the pattern its occurrences made."""
    return signature_of(redact_secrets(error).text)


def build_fix_pattern(
    occurrences: Sequence[ErrorOccurrence],
    runs: Mapping[str, RunFacts],
    succeeded: Iterable[RunFacts],
    window: timedelta = DEFAULT_FIX_WINDOW,
) -> FixPattern:
    """The fix pattern of one signature in one namespace.

    `runs` holds the facts of the runs that met the error; `succeeded` every succeeded run
    that may have fixed it (same task keys or repos); the rules here decide which did.
    """
    if not occurrences:
        raise ValueError("a fix pattern needs at least one occurrence")
    ordered = sorted(occurrences, key=lambda o: (o.occurred_at, o.event_id))
    first = ordered[0]
    counted = counted_occurrences(ordered)
    first_met: dict[str, datetime] = {}
    for occurrence in ordered:
        first_met.setdefault(occurrence.run_id, occurrence.occurred_at)

    candidates = sorted(
        (run for run in succeeded if run.status == "succeeded" and run.finished_at),
        key=lambda run: (run.finished_at, run.run_id),
    )
    fixed_after: dict[str, list[str]] = {}
    for run_id, met_at in first_met.items():
        fixer = _fixer(runs.get(run_id), run_id, met_at, candidates, window)
        if fixer is not None:
            fixed_after.setdefault(fixer.run_id, []).append(run_id)
    by_id = {run.run_id: run for run in candidates} | {
        run_id: run for run_id, run in runs.items() if run.status == "succeeded"
    }
    fixes = sorted(
        (_fix(first.namespace, by_id[run_id], after) for run_id, after in fixed_after.items()),
        key=lambda fix: (fix.finished_at, fix.run_id),
        reverse=True,
    )
    return FixPattern(
        namespace=first.namespace,
        signature=first.signature,
        example=first.message,
        count=len(counted),
        first_seen=first.occurred_at,
        last_seen=ordered[-1].occurred_at,
        runs=tuple(sorted(first_met, key=lambda run_id: (first_met[run_id], run_id))),
        provenance=ordered[-1].provenance,
        fixes=tuple(fixes[:MAX_FIXES]),
        success_count=len(fixes),
    )


def counted_occurrences(occurrences: Sequence[ErrorOccurrence]) -> list[ErrorOccurrence]:
    """The occurrences that count, in the order given: a failed run.finished restating an
    error its run's steps already reported is one occurrence, not two."""
    stepped = {(o.run_id, o.signature.signature_id) for o in occurrences if o.origin == "step"}
    return [o for o in occurrences
            if o.origin == "step" or (o.run_id, o.signature.signature_id) not in stepped]


@dataclass(frozen=True)
class RunError:
    """One kind of error a run met: its signature, how often, first when, and the example
    of its first occurrence."""

    signature: ErrorSignature
    count: int
    first_seen: datetime
    example: str


def run_errors(occurrences: Sequence[ErrorOccurrence]) -> list[RunError]:
    """A run's occurrences grouped by signature, in the order the run first met them."""
    ordered = sorted(occurrences, key=lambda o: (o.occurred_at, o.event_id))
    by_signature: dict[str, list[ErrorOccurrence]] = {}
    for occurrence in counted_occurrences(ordered):
        by_signature.setdefault(occurrence.signature.signature_id, []).append(occurrence)
    return [RunError(met[0].signature, len(met), met[0].occurred_at, met[0].message)
            for met in by_signature.values()]


def fix_pattern_title(signature: ErrorSignature) -> str:
    """The title of a signature's fix pattern; also what a lookup by error text embeds."""
    return condense(f"{signature.exception_type or 'error'}: {signature.template}", 200)


def fix_pattern_record(pattern: FixPattern) -> Record:
    sig = pattern.signature
    title = fix_pattern_title(sig)
    runs = pattern.runs[-MAX_RUNS_LISTED:]
    related = [fix.digest_record_id for fix in pattern.fixes] + [
        digest_record_id(pattern.namespace, run_id) for run_id in reversed(runs)
    ]
    return Record(
        record_id=fix_pattern_record_id(pattern.namespace, sig.signature_id),
        namespace=pattern.namespace,
        record_kind="fix_pattern",
        title=title,
        text=pattern.playbook(),
        body={
            "signature_id": sig.signature_id,
            "dialect": sig.dialect,
            "exception_type": sig.exception_type,
            "template": sig.template,
            "frames": list(sig.frames),
            "example": pattern.example,
            "occurrences": {
                "count": pattern.count,
                "first_seen": pattern.first_seen.isoformat(),
                "last_seen": pattern.last_seen.isoformat(),
                "runs": list(runs),
                "run_count": len(pattern.runs),
            },
            "fixes": [_fix_body(fix) for fix in pattern.fixes],
            "success_count": pattern.success_count,
        },
        tags=("error-signature", sig.dialect),
        related_ids=tuple(dict.fromkeys(related))[:MAX_RELATED_IDS],
        trust_class="derived",
        source_ref=f"signature:{sig.signature_id}",
        provenance=pattern.provenance,
        created_at=pattern.first_seen,
    )


def _fixer(
    failed: RunFacts | None,
    run_id: str,
    met_at: datetime,
    candidates: Sequence[RunFacts],
    window: timedelta,
) -> RunFacts | None:
    if failed is None:
        return None
    if failed.status == "succeeded":
        return failed
    for run in candidates:
        assert run.finished_at is not None
        if run.run_id == run_id or run.finished_at <= met_at:
            continue
        if failed.task_key is not None:
            if run.task_key == failed.task_key:
                return run
        elif (
            failed.repo is not None
            and run.repo == failed.repo
            and run.finished_at <= met_at + window
        ):
            return run
    return None


def _fix(namespace: str, run: RunFacts, after: list[str]) -> Fix:
    assert run.finished_at is not None
    return Fix(
        run_id=run.run_id,
        digest_record_id=digest_record_id(namespace, run.run_id),
        task_key=run.task_key,
        repo=run.repo,
        finished_at=run.finished_at,
        after_runs=tuple(sorted(after)),
        commits=run.commits,
        pull_requests=run.pull_requests,
        files_changed=run.files_changed,
        key_changes=run.key_changes,
    )


def _fix_body(fix: Fix) -> dict[str, object]:
    return {
        "run_id": fix.run_id,
        "digest_record_id": fix.digest_record_id,
        "task_key": fix.task_key,
        "repo": fix.repo,
        "finished_at": fix.finished_at.isoformat(),
        "after_runs": list(fix.after_runs),
        "commits": list(fix.commits),
        "pull_requests": list(fix.pull_requests),
        "files_changed": list(fix.files_changed),
        "key_changes": list(fix.key_changes),
    }


def _day(moment: datetime) -> str:
    return moment.date().isoformat()

