"""Run-history figures: how long a digest takes to build, and a fix pattern to rebuild.

    python -m bench.history_bench

Digests are built from synthetic runs of 10, 100 and 1,000 events (tool calls, decisions,
errors with Python tracebacks, retries, artifacts; a few long free-text steps), the way the
worker builds them: parse the ledger rows, build, render. A fix pattern is rebuilt from 200
occurrences over 50 runs and 20 candidate fixing runs, as one namespace's busy signature.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from memstream_client.events import RUN_EVENT_TYPES, Provenance, RunEvent
from processors.runs.digests import build_digest
from processors.runs.fix_patterns import (
    ErrorOccurrence,
    RunFacts,
    build_fix_pattern,
    error_occurrences,
    fix_pattern_record,
)
from schemas.topics import RUNS_EVENTS
from stores.runs import LedgerEntry

T0 = datetime(2026, 11, 1, tzinfo=UTC)
PROVENANCE = Provenance(source_event_id="e", source_topic=RUNS_EVENTS, source_partition=0,
                        source_offset=0, producer="bench")
TRACE = """Traceback (most recent call last):
  File "/srv/app/jobs/{module}.py", line {line}, in run_{module}
    return client.fetch(item_id)
  File "/usr/lib/python3.11/site-packages/httpx/_client.py", line 1574, in get
    raise ConnectTimeout(message)
httpx.ConnectTimeout: timed out after {ms} ms fetching item {item}"""


def ledger_rows(run_id: str, size: int, rng: random.Random) -> list[LedgerEntry]:
    """A run's ledger as the store returns it (stores.runs)."""
    rows = [_row(run_id, 0, "run.started", intent="Sync the catalogue " * 5, task_key="SYNC-1")]
    for n in range(1, size - 1):
        roll = rng.random()
        if roll < 0.1:
            payload: dict[str, Any] = {"kind": "error", "error": TRACE.format(
                module=rng.choice(["sync", "prices"]), line=rng.randint(1, 500),
                ms=rng.randint(1000, 30000), item=rng.randint(1, 10**6))}
        elif roll < 0.2:
            payload = {"kind": "retry", "attempt": rng.randint(2, 5)}
        elif roll < 0.3:
            payload = {"kind": "decision", "text": "Batch the requests. " * rng.randint(1, 30)}
        elif roll < 0.35:
            rows.append(_row(run_id, n, "run.artifact", kind="log",
                             ref=f"artifacts/{run_id}/log-{n}.txt"))
            continue
        else:
            payload = {"kind": "tool_call", "tool": "http", "text": f"GET /items/{n}"}
        rows.append(_row(run_id, n, "run.step", **payload))
    rows.append(_row(run_id, size - 1, "run.finished", status="succeeded",
                     commits=["abc123", "def456"], files_changed=["jobs/sync.py"]))
    return rows


def _row(run_id: str, n: int, type_: str, **payload: Any) -> LedgerEntry:
    return LedgerEntry(event_id=f"{run_id}-{n:05d}", type=type_, namespace="bench",
                       occurred_at=T0 + timedelta(seconds=n), producer="bench",
                       payload={"run_id": run_id, **payload})


def digest_ms(rows: list[LedgerEntry]) -> float:
    def once() -> None:
        events = [RUN_EVENT_TYPES[row.type].model_validate(row, from_attributes=True)
                  for row in rows]
        build_digest(events).render()

    return _best_ms(once)


def fix_pattern_ms(rng: random.Random) -> float:
    occurrences: list[ErrorOccurrence] = []
    for n in range(200):
        run_id = f"r{n % 50}"
        event: RunEvent = RUN_EVENT_TYPES["run.step"].model_validate(
            _row(run_id, n, "run.step", kind="error", error=TRACE.format(
                module="sync", line=42, ms=rng.randint(1000, 30000), item=n)),
            from_attributes=True)
        occurrences.extend(error_occurrences(event, PROVENANCE))
    runs = {f"r{n}": RunFacts(f"r{n}", "SYNC-1", "acme/sync", "failed",
                              T0 + timedelta(minutes=n)) for n in range(50)}
    succeeded = [RunFacts(f"s{n}", "SYNC-1", "acme/sync", "succeeded",
                          T0 + timedelta(minutes=5 * n), commits=(f"c{n}",),
                          key_changes=(f"commit c{n}",)) for n in range(20)]
    return _best_ms(lambda: fix_pattern_record(build_fix_pattern(occurrences, runs, succeeded)))


def _best_ms(fn: Callable[[], object], repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best * 1000


def run_history_bench() -> list[tuple[str, str, str]]:
    rng = random.Random(3)
    rows = [
        (f"digest build, run of {size} events (parse + build + render)",
         f"{digest_ms(ledger_rows(f'run{size}', size, rng)):.2f} ms", "")
        for size in (10, 100, 1000)
    ]
    rows.append(("fix pattern rebuild, 200 occurrences / 50 runs / 20 fixes",
                 f"{fix_pattern_ms(rng):.2f} ms", ""))
    return rows


if __name__ == "__main__":
    for name, value, target in run_history_bench():
        print(f"{name:<62}  {value:>16}  {target}")
