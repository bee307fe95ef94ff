"""Core memory blocks (seed 004): an agent's small, always-present memory (`persona`,
`human`, any label), bracketed fields under a character limit, rotated into archival memory
when they fill up.

A block is fields in the order they were first set; a field holds a text or a list of items,
oldest first. Serialized, one field a line: `[TASK] Brainstorm essay topics`,
`[PREFS] Socratic questions; Detailed feedback`.

Rotation: once a block uses more than its strategy's threshold of the limit, content leaves
it until it uses half the limit, and what left becomes an archival memory (searchable, with
provenance back to the block version). What leaves first:
- aggressive (70%): the oldest, whatever the field (keeps the block lean and recent);
- preservative (90%): list items, oldest first; single-text fields stay while they can;
- adaptive (80%, the default): the least important first (TASK 100, USER 90, CONTEXT 80,
  any other 50), oldest items first within a field. Its threshold moves with how often the
  block rotates: once 10 edits were made under it, rotating on more than half of them
  raises it by 0.05 (at most 0.95), on none lowers it by 0.05 (at least 0.6).
Whatever the strategy, a block never stays over its limit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Literal

from memstream_client.events import MemoryBlockPayload, RotationStrategy
from processors.events.errors import Rejected

FieldValue = str | tuple[str, ...]
THRESHOLDS: Mapping[RotationStrategy, float] = {
    "aggressive": 0.7, "preservative": 0.9, "adaptive": 0.8,
}
IMPORTANCE: Mapping[str, int] = {"TASK": 100, "USER": 90, "CONTEXT": 80}
OTHER_IMPORTANCE = 50
# A rotation empties the block down to this share of its limit.
ROTATE_DOWN_TO = 0.5
ADAPTIVE_WINDOW = 10
ADAPTIVE_STEP = 0.05
ADAPTIVE_RANGE = (0.6, 0.95)
ITEM_SEPARATOR = "; "


@dataclass(frozen=True)
class Block:
    namespace: str
    agent_id: str
    label: str
    fields: Mapping[str, FieldValue]
    version: int
    strategy: RotationStrategy
    threshold: float
    # Whether each of the last edits rotated, oldest first (the adaptive strategy's memory).
    rotations: tuple[bool, ...] = ()

    @property
    def text(self) -> str:
        return serialize(self.fields)


@dataclass(frozen=True)
class BlockEdit:
    """A block after an edit, and the lines the edit rotated out of it (none when it did
    not rotate)."""

    block: Block
    changed: tuple[str, ...]
    archived: tuple[str, ...] = ()
    usage_before_rotation: float = 0.0


def empty_block(namespace: str, agent_id: str, label: str,
                strategy: RotationStrategy = "adaptive") -> Block:
    return Block(namespace, agent_id, label, {}, 0, strategy, THRESHOLDS[strategy])


def serialize(fields: Mapping[str, FieldValue]) -> str:
    return "\n".join(line for _, line in field_lines(fields))


def field_lines(fields: Mapping[str, FieldValue]) -> list[tuple[str, str]]:
    """Each field that holds something, with its line as the agent sees it, in order."""
    return [(name, f"[{name}] {_joined(value)}") for name, value in fields.items() if value]


def edit_block(block: Block, payload: MemoryBlockPayload, max_chars: int) -> BlockEdit:
    """Apply an edit, then rotate what does not fit; raises `Rejected` for a stale edit."""
    if payload.expected_version is not None and payload.expected_version != block.version:
        raise Rejected("stale_version", f"block {block.label} of {block.agent_id} is at "
                       f"version {block.version}, the edit expected {payload.expected_version}")
    fields = dict(block.fields)
    for name, value in payload.set.items():
        fields[name] = value if isinstance(value, str) else tuple(value)
    for name, items in payload.append.items():
        current = fields.get(name)
        # Appending to a text field makes it a list whose first item is that text.
        before = () if not current else (current,) if isinstance(current, str) \
            else tuple(current)
        fields[name] = (*before, *items)
    fields = {name: value for name, value in fields.items() if value}
    strategy = payload.strategy or block.strategy
    threshold = block.threshold if strategy == block.strategy else THRESHOLDS[strategy]
    changed = tuple(sorted(set(payload.set) | set(payload.append)))
    usage = len(serialize(fields)) / max_chars
    rotate = usage > threshold
    kept, archived = (_rotated(fields, strategy, int(max_chars * ROTATE_DOWN_TO))
                      if rotate else (fields, []))
    rotations = (*block.rotations, rotate)[-ADAPTIVE_WINDOW:]
    adapted = _adapted(strategy, threshold, rotations)
    if adapted != threshold:
        rotations = ()  # a new threshold is judged on the edits made under it
    edited = replace(block, fields=kept, version=block.version + 1, strategy=strategy,
                     threshold=adapted, rotations=rotations)
    return BlockEdit(edited, changed, tuple(archived), usage)


@dataclass(frozen=True)
class BlockDiff:
    """An edit proposed to a protected block, waiting for review."""

    diff_id: str
    namespace: str
    agent_id: str
    label: str
    base_version: int
    payload: MemoryBlockPayload
    proposer: str
    proposed_at: datetime
    state: Literal["pending", "approved", "rejected", "superseded"] = "pending"


def approved_edit(block: Block, diff: BlockDiff, max_chars: int) -> BlockEdit:
    """The edit a reviewer approves, applied to the block as it is; refused if the block
    moved on since it was proposed, or if the diff is decided already."""
    if diff.state != "pending":
        raise Rejected("invalid_transition", f"diff {diff.diff_id} is {diff.state}")
    if diff.base_version != block.version:
        raise Rejected("stale_version", f"diff {diff.diff_id} was proposed against version "
                       f"{diff.base_version} of block {block.label} of {block.agent_id}, "
                       f"which is at version {block.version}")
    return edit_block(block, diff.payload.model_copy(update={"expected_version": None}),
                      max_chars)


def archival_text(block: Block, lines: Sequence[str], at: datetime) -> str:
    """What a rotation archived, in the seed's archival format."""
    return "\n".join([f"[ARCHIVED {at.replace(microsecond=0).isoformat()}] from block "
                      f"{block.label} of {block.agent_id}, version {block.version}", *lines])


@dataclass(frozen=True)
class _Unit:
    """One thing that can leave a block: a whole text field, or one item of a list."""

    field: str
    item: int | None
    text: str
    # The order in which the strategy lets units go: lower first.
    rank: tuple[int, ...]


def _rotated(fields: Mapping[str, FieldValue], strategy: RotationStrategy,
             target: int) -> tuple[dict[str, FieldValue], list[str]]:
    """The fields that stay (at most `target` characters once serialized) and the lines
    that leave, in the block's order."""
    units = sorted(_units(fields, strategy), key=lambda unit: unit.rank)
    leaving: set[tuple[str, int | None]] = set()
    kept = dict(fields)
    for unit in units:
        if len(serialize(kept)) <= target:
            break
        leaving.add((unit.field, unit.item))
        kept = _without(fields, leaving)
    archived = [f"[{unit.field}] {unit.text}" for unit in _units(fields, strategy)
                if (unit.field, unit.item) in leaving]
    return kept, archived


def _units(fields: Mapping[str, FieldValue], strategy: RotationStrategy) -> list[_Unit]:
    units = []
    age = 0
    for position, (name, value) in enumerate(fields.items()):
        items = [(None, value)] if isinstance(value, str) else list(enumerate(value))
        for item, text in items:
            units.append(_Unit(name, item, text, _rank(strategy, name, item, position, age)))
            age += 1
    return units


def _rank(strategy: RotationStrategy, name: str, item: int | None, position: int,
          age: int) -> tuple[int, ...]:
    if strategy == "aggressive":
        return (age,)
    if strategy == "preservative":
        return (item is None, age)
    return (IMPORTANCE.get(name, OTHER_IMPORTANCE), position, item or 0)


def _without(fields: Mapping[str, FieldValue],
             leaving: set[tuple[str, int | None]]) -> dict[str, FieldValue]:
    kept: dict[str, FieldValue] = {}
    for name, value in fields.items():
        if isinstance(value, str):
            if (name, None) not in leaving:
                kept[name] = value
            continue
        items = tuple(text for item, text in enumerate(value) if (name, item) not in leaving)
        if items:
            kept[name] = items
    return kept


def _adapted(strategy: RotationStrategy, threshold: float,
             rotations: tuple[bool, ...]) -> float:
    if strategy != "adaptive" or len(rotations) < ADAPTIVE_WINDOW:
        return threshold
    low, high = ADAPTIVE_RANGE
    share = sum(rotations) / len(rotations)
    if share > 0.5:
        return round(min(high, threshold + ADAPTIVE_STEP), 2)
    if share == 0:
        return round(max(low, threshold - ADAPTIVE_STEP), 2)
    return threshold


def _joined(value: FieldValue) -> str:
    return value if isinstance(value, str) else ITEM_SEPARATOR.join(value)


def usage(block: Block, max_chars: int) -> float:
    return len(block.text) / max_chars

