"""Corrections awaiting review, as recall shows them. Under the review policy an invalidation
the stale-fact finder proposes for a protected memory (processors/memory/lifecycle.py
`invalidated`) waits as a pending diff, and the older memory stays in force until a reviewer
decides. Until then it is *contested*: recall still shows it (the reviewer may reject the
correction), but never as the equal of what contests it.

- Whenever both are shown, the older ranks below the newer: its score is at most
  `CONTESTED_WEIGHT` of the newer's, so it follows its correction rather than leading it.
- When only the older matched, the newer is brought in (the read core reads it) and takes the
  older's place and score: an agent that asked about the fact must see its correction, even
  in other words than the question's.
- The older says by which memory it is contested and under which diff, the newer which
  memories it corrects, and the pack says it in a line (`note`).

Approving the diff invalidates the older (it leaves recall, as any invalidated memory);
rejecting it ends the contest. Nothing here is kept: the contest is the pending diff, read
with the records (stores/records.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

# The most of its correction's score a contested memory keeps. Below 1 so that it ranks after
# the newer memory; not far below, because until a reviewer decides it may still be the true
# one, and the next best hits of the question should not all come between the two.
CONTESTED_WEIGHT = 0.9


@dataclass(frozen=True)
class Contest:
    """`newer` restated `older` with another value, and the invalidation of `older` waits for
    a reviewer as the pending diff `diff_id`."""

    older: str
    newer: str
    diff_id: str


@dataclass(frozen=True)
class Ranked:
    """A record as recall ranks it: its score, and the contest in which it is the older (if
    any)."""

    record_id: str
    score: float
    contested: Contest | None = None


def corrections_missing(ranked: Sequence[Ranked]) -> list[str]:
    """The newer memories of the contested records among `ranked` that are not among them:
    what the read core brings in, in a stable order."""
    shown = {item.record_id for item in ranked}
    return sorted({item.contested.newer for item in ranked
                   if item.contested is not None and item.contested.newer not in shown})


def place_taken(ranked: Sequence[Ranked], newer: str) -> Ranked:
    """The record among `ranked` whose place a correction brought in takes: the best scored
    of those it contests (its place, had the question matched the correction as well)."""
    return min((item for item in ranked
                if item.contested is not None and item.contested.newer == newer),
               key=lambda item: (-item.score, item.record_id))


def settled(ranked: Sequence[Ranked]) -> list[Ranked]:
    """`ranked` with every contested record whose correction is among them scored at most
    `CONTESTED_WEIGHT` of the correction's (settled) score, best first: a correction always
    before what it contests (a chain of corrections in its order); records whose scores tie
    keep their order."""
    by_id = {item.record_id: item for item in ranked}
    scores: dict[str, float] = {}
    depths: dict[str, int] = {}

    def settle(record_id: str, visiting: frozenset[str]) -> tuple[float, int]:
        if record_id in scores:
            return scores[record_id], depths[record_id]
        item = by_id[record_id]
        score, depth = item.score, 0
        contest = item.contested
        # A cycle (two memories each found to restate the other) demotes neither past the
        # first of them met: no order between them is better founded than the other.
        if contest is not None and contest.newer in by_id and contest.newer not in visiting:
            newer_score, newer_depth = settle(contest.newer, visiting | {record_id})
            score, depth = min(score, CONTESTED_WEIGHT * newer_score), newer_depth + 1
        scores[record_id], depths[record_id] = score, depth
        return score, depth

    for item in ranked:
        settle(item.record_id, frozenset())
    position = {item.record_id: at for at, item in enumerate(ranked)}
    return sorted((replace(item, score=scores[item.record_id]) for item in ranked),
                  key=lambda item: (-item.score, depths[item.record_id],
                                    position[item.record_id]))


def corrected(ranked: Sequence[Ranked]) -> dict[str, tuple[Contest, ...]]:
    """For each record among `ranked` that contests others among them, those contests (by
    the older's id)."""
    shown = {item.record_id for item in ranked}
    found: dict[str, list[Contest]] = {}
    for item in ranked:
        if item.contested is not None and item.contested.newer in shown:
            found.setdefault(item.contested.newer, []).append(item.contested)
    return {newer: tuple(sorted(contests, key=lambda c: c.older))
            for newer, contests in found.items()}


def note(contest: Contest) -> str:
    """The line a pack carries for a contested memory it serves."""
    return (f"{contest.older} is contested by the newer {contest.newer}, which restates it "
            f"with another value (pending review, diff {contest.diff_id}): it may be out of "
            "date.")


def summary_mark(contest: Contest) -> str:
    """What a summary's line of a contested memory says before its text."""
    return f"(contested by {contest.newer}, pending review)"
