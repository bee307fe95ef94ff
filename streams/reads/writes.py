"""What became of a write, read by its event id (stores/write_outcomes.py), now or within a
bounded wait: a write route that publishes an event waits for the worker to decide it, so
that its caller is answered the record that holds it (or why none does) rather than an id
that may never exist.

A wait polls the outcome, a few small reads of Postgres by key: every 20 ms at first, then
less often, up to every 250 ms. A store that fails while waiting ends the wait: the write is
answered as pending (memory must not fail its caller over a courtesy).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

from stores.write_outcomes import WriteOutcome, WriteOutcomes

log = logging.getLogger(__name__)

# The longest a request may wait for a write's outcome: past it, an HTTP client would
# rather be told where to read it.
MAX_WAIT_S = 30.0
FIRST_POLL_S = 0.02
LONGEST_POLL_S = 0.25


async def outcomes_within(store: WriteOutcomes, namespace: str, event_ids: Sequence[str],
                          wait_s: float, carrier: str | None = None
                          ) -> dict[str, WriteOutcome]:
    """The decided outcomes of these writes, waiting up to `wait_s` for all of them (0:
    read once); a write not decided by then is missing from the answer.

    `carrier` is the event the writes come from (a session step, whose memories the worker
    derives): once it is dead-lettered none of them will be decided, so the wait ends there,
    with the carrier's outcome in the answer under its own id."""
    decided: dict[str, WriteOutcome] = {}
    deadline = time.monotonic() + min(max(wait_s, 0.0), MAX_WAIT_S)
    pause = FIRST_POLL_S
    while True:
        try:
            if carrier is not None:
                lost = await store.outcome(namespace, carrier)
                if lost is not None and lost.outcome == "dead_lettered":
                    return {**decided, carrier: lost}
            for event_id in event_ids:
                if event_id not in decided:
                    found = await store.outcome(namespace, event_id)
                    if found is not None:
                        decided[event_id] = found
        except Exception as exc:
            log.warning("could not read the outcome of writes to %s; answering them as "
                        "pending: %s", namespace, exc)
            return decided
        left = deadline - time.monotonic()
        if len(decided) == len(set(event_ids)) or left <= 0:
            return decided
        await asyncio.sleep(min(pause, left))
        pause = min(pause * 2, LONGEST_POLL_S)
