"""What became of a write (`WriteOutcome`, `answers/writes.py`), in the words every door
says it with: the CLI to a person, the MCP tools and the pydantic-ai toolset to a model. Each
door adds how its own caller reads a pending outcome later (a command, a tool), since a
model or a person can only act on the way it has.

A write is held by a record only once the worker has decided it: a new record (`stored`), or
the live memory it says again (`restated`, when twins are on). A refused, dead-lettered or
pending write is held by none, so no door ever answers an id for it.
"""

from __future__ import annotations

from memstream_client.answers.writes import WriteOutcome

# The outcomes of a memory write whose content memory holds, under the outcome's record id.
HELD = frozenset({"stored", "restated"})
# The outcomes of an update that did what was asked: applied, or waiting for a reviewer.
CHANGED = frozenset({"updated", "proposed"})
# The outcomes that say all there is by their name and the record they name.
PLAIN = frozenset({"stored", "updated", "deprecated", "restored", "approved", "rejected",
                   "invalidated", "promoted"})

# Why the refusal rules (processors/memory/refusal.py) refused a write; a reason this client
# does not know yet is shown as the worker named it.
REFUSED_BECAUSE = {
    "too_short": "too short to hold a fact",
    "no_content_words": "function words only, nothing a fact could rest on",
    "filler": "filler (a greeting, thanks, an acknowledgement) and no fact",
    "only_a_secret": "nothing but a secret, which memory never keeps",
}


def held_by(outcome: WriteOutcome) -> str | None:
    """The record that holds a memory write's content: the one it made, or the memory it
    restated; None while undecided, or when refused or dead-lettered."""
    return outcome.record_id if outcome.outcome in HELD else None


def subject(outcome: WriteOutcome) -> str:
    """What a change was made to: its core block, else its record."""
    if outcome.block is not None:
        return f"block {outcome.block.label!r} of {outcome.block.agent_id}"
    return outcome.record_id or "the record"


def said(outcome: WriteOutcome) -> str:
    """What became of a write, in one sentence."""
    version = "" if outcome.version is None else f" (version {outcome.version})"
    match outcome.outcome:
        case "stored":
            return f"stored as {outcome.record_id}"
        case "restated":
            return (f"restated: {outcome.record_id} already held this, so the write was kept "
                    f"in it{version}, not as a new memory")
        case "proposed":
            return (f"proposed: {subject(outcome)} is protected, so the change waits for a "
                    f"reviewer as pending diff {outcome.diff_id}")
        case "unchanged":
            return f"unchanged: {subject(outcome)} already said that"
        case "refused":
            why = REFUSED_BECAUSE.get(outcome.reason or "", "not worth keeping")
            return f"refused ({outcome.reason}): {why}; nothing was stored"
        case "dead_lettered":
            detail = f": {outcome.detail}" if outcome.detail else ""
            return f"dead-lettered ({outcome.reason}){detail}; nothing was changed"
        case "pending":
            return "pending: the worker has not decided it yet"
        case _:
            return f"{outcome.outcome}: {subject(outcome)}{version}"


def note(outcome: WriteOutcome, check_later: str) -> str | None:
    """What a caller is told beyond the outcome's name: what became of the write and why,
    and while it is pending how to read it later (`check_later`, the door's own way). A plain
    one (`stored`, `updated`, `approved`, …) says all it needs by its name and its record."""
    if outcome.outcome in PLAIN:
        return None
    if not outcome.decided:
        return f"{said(outcome)}: {check_later}"
    return said(outcome)
