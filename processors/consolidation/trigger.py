"""When a namespace is due for consolidation: the seed's maintenance short-circuit rules, and
the tumbling windows that new memories are counted in.

After each batch of memory writes, a namespace that stored new memories is checked: a request
goes to `memory.consolidate` when at least `min_new_memories` arrived since its last report
and, by default, no report exists today. Each request has a basis (the day, or the last report
when several runs a day are allowed) and at most one request is made per basis, so a replayed
batch or a second worker cannot ask twice. The consolidator checks the rules again, because a
report may have been written meanwhile (a manual run).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Literal

SkipReason = Literal["report_today", "too_few_new_memories"]
# What became of a consolidation request: carried out, found carried out before, or skipped.
RunOutcome = Literal["consolidated", "already_done", "report_today", "too_few_new_memories"]


@dataclass(frozen=True)
class TriggerRules:
    """The seed's defaults: at least 10 new memories since the last report, one report a day;
    counts kept per 30-minute tumbling window for a day."""

    min_new_memories: int = 10
    once_per_day: bool = True
    window: timedelta = timedelta(minutes=30)
    keep_windows_for: timedelta = timedelta(days=1)

    def __post_init__(self) -> None:
        if self.min_new_memories < 1:
            raise ValueError("min_new_memories must be at least 1")
        if self.window <= timedelta(0) or self.keep_windows_for < self.window:
            raise ValueError("the window must be positive and kept at least its own length")


def window_start(moment: datetime, window: timedelta) -> datetime:
    """The start of the tumbling window `moment` falls in; windows are aligned on the epoch,
    as Postgres computes them (stores.records)."""
    seconds = window.total_seconds()
    epoch = moment.timestamp()
    return datetime.fromtimestamp(epoch - epoch % seconds, UTC)


def skip_reason(*, reports_today: int, new_since_report: int,
                rules: TriggerRules) -> SkipReason | None:
    """Why a namespace is not due (None: it is). Manual requests are not asked: an
    operator's request always runs."""
    if rules.once_per_day and reports_today > 0:
        return "report_today"
    if new_since_report < rules.min_new_memories:
        return "too_few_new_memories"
    return None


def request_basis(today: date, last_report_id: str | None, rules: TriggerRules) -> str:
    """What a counted request is one of: at most one is made per basis and namespace."""
    if rules.once_per_day:
        return f"day:{today.isoformat()}"
    return f"after:{last_report_id or '-'}"
