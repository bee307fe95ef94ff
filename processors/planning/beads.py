"""Beads' work items (steveyegge/beads, the `bd` tracker) as its `.beads/issues.jsonl` holds
them: parsing the file, writing it back byte for byte the way bd writes it, readiness, the
planning context of an item, and the changes a run makes (claim, close, release, follow-ups).

An item keeps every field it was read with, in the line's order, so that writing back an
item nobody changed gives back its line; a changed field keeps its place, and a new one goes
where bd's `Issue` struct puts it (`BD_FIELD_ORDER`). Two line styles occur in real files
(docs/planning.md): bd's own (Go's encoder: no spaces, `<`, `>` and `&` escaped, UTF-8 kept)
and the `": "`/`", "` style of exports made outside bd (Python's encoder, nothing escaped);
a file is written back in the style it was read in.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal

Style = Literal["bd", "spaced"]

# bd's `Issue` struct (internal/types/types.go), then what `IssueWithCounts` adds: a field
# bd writes for the first time goes before the first present field that follows it here.
BD_FIELD_ORDER = (
    "id", "title", "description", "design", "acceptance_criteria", "notes", "spec_id",
    "status", "priority", "issue_type", "assignee", "owner", "estimated_minutes",
    "created_at", "created_by", "updated_at", "started_at", "closed_at", "close_reason",
    "closed_by_session", "due_at", "defer_until", "external_ref", "source_system", "metadata",
    "compaction_level", "compacted_at", "compacted_at_commit", "original_size", "labels",
    "dependencies", "comments", "sender", "ephemeral", "no_history", "wisp_type", "pinned",
    "is_template", "dependency_count", "dependent_count", "comment_count", "parent",
)
DEPENDENCY_FIELD_ORDER = ("issue_id", "depends_on_id", "type", "created_at", "created_by",
                          "metadata", "thread_id")
STATUSES = ("open", "in_progress", "blocked", "deferred", "closed", "pinned", "hooked")
# Done with: closed, or deleted (bd before 0.30 kept a deleted item as a `tombstone`).
DONE_STATUSES = frozenset({"closed", "tombstone"})
# The kinds of dependency that hold an item back (bd's IsBlockingEdge).
BLOCKING_KINDS = frozenset({"blocks", "conditional-blocks", "waits-for"})
DEFAULT_PRIORITY = 2
MAX_SIBLINGS = 10
# bd's adaptive hash ids: the shortest base36 length whose birthday collision chance among
# the prefix's items stays under MAX_COLLISION (internal/storage/domain/adaptive.go).
MIN_ID_LENGTH, MAX_ID_LENGTH, MAX_COLLISION = 3, 8, 0.25
_HASH_BYTES = {3: 2, 4: 3, 5: 4, 6: 4, 7: 5, 8: 5}
_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


class BeadsFormatError(ValueError):
    """A line of an issues.jsonl that is no work item; `line` counts from 1."""

    def __init__(self, line: int, detail: str) -> None:
        super().__init__(f"line {line}: {detail}")
        self.line = line
        self.detail = detail


class UnknownItem(KeyError):
    """A work item the file does not hold."""


@dataclass(frozen=True)
class Dependency:
    depends_on_id: str
    kind: str


@dataclass(frozen=True)
class WorkItem:
    """One line of the file: every field as read, in the line's order."""

    fields: Mapping[str, Any]

    @property
    def id(self) -> str:
        return str(self.fields["id"])

    @property
    def title(self) -> str:
        return str(self.fields["title"])

    @property
    def status(self) -> str:
        # bd leaves an empty status out, and reads it as open.
        return str(self.fields.get("status") or "open")

    @property
    def priority(self) -> int:
        return int(self.fields.get("priority", DEFAULT_PRIORITY))

    @property
    def issue_type(self) -> str:
        return str(self.fields.get("issue_type") or "task")

    @property
    def assignee(self) -> str | None:
        return self.fields.get("assignee") or None

    @property
    def description(self) -> str:
        return str(self.fields.get("description") or "")

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(self.fields.get("labels") or ())

    @property
    def close_reason(self) -> str | None:
        return self.fields.get("close_reason") or None

    @property
    def dependencies(self) -> tuple[Dependency, ...]:
        return tuple(Dependency(str(dep["depends_on_id"]), str(dep["type"]))
                     for dep in self.fields.get("dependencies") or ())

    @property
    def parent(self) -> str | None:
        """Its parent: a `parent-child` dependency, else the computed `parent` an export
        carries, else what its hierarchical id says (`bd-2vh3.4` → `bd-2vh3`)."""
        for dep in self.dependencies:
            if dep.kind == "parent-child":
                return dep.depends_on_id
        if self.fields.get("parent"):
            return str(self.fields["parent"])
        return self.id.rsplit(".", 1)[0] if "." in self.id else None

    @property
    def acceptance_criteria(self) -> str:
        """The field when the item has it, else its description's "Acceptance Criteria"
        section (the heading bd's templates write)."""
        given = str(self.fields.get("acceptance_criteria") or "").strip()
        return given or _section(self.description, "acceptance criteria")

    @property
    def closed(self) -> bool:
        return self.status in DONE_STATUSES


@dataclass(frozen=True)
class BeadsFile:
    items: tuple[WorkItem, ...]
    style: Style
    # Old bd sorted its export by id; a sorted file stays sorted when an item is added.
    sorted_by_id: bool

    def by_id(self) -> dict[str, WorkItem]:
        return {item.id: item for item in self.items}

    def item(self, item_id: str) -> WorkItem:
        for item in self.items:
            if item.id == item_id:
                return item
        raise UnknownItem(item_id)


def parse(text: str) -> BeadsFile:
    """The items of an issues.jsonl, blank lines skipped (as bd does); a line that is not a
    work item raises BeadsFormatError naming it."""
    items: list[WorkItem] = []
    style: Style | None = None
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            fields = json.loads(line)
        except ValueError as exc:
            raise BeadsFormatError(number, f"not JSON ({exc})") from None
        _check(number, fields)
        style = style or ("spaced" if line.startswith('{"id": ') else "bd")
        items.append(WorkItem(fields))
    ids = [item.id for item in items]
    return BeadsFile(tuple(items), style or "bd", ids == sorted(ids))


def _check(number: int, fields: Any) -> None:
    if not isinstance(fields, dict):
        raise BeadsFormatError(number, "not a JSON object")
    for name in ("id", "title"):
        if not isinstance(fields.get(name), str) or not fields[name]:
            raise BeadsFormatError(number, f"`{name}` is missing or not a string")
    if not isinstance(fields.get("status", ""), str):
        raise BeadsFormatError(number, "`status` is not a string")
    if type(fields.get("priority", 0)) is not int:
        raise BeadsFormatError(number, "`priority` is not an integer")
    labels = fields.get("labels") or []
    if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
        raise BeadsFormatError(number, "`labels` is not a list of strings")
    dependencies = fields.get("dependencies") or []
    if not isinstance(dependencies, list) or not all(
            isinstance(dep, dict) and isinstance(dep.get("depends_on_id"), str)
            and isinstance(dep.get("type"), str) for dep in dependencies):
        raise BeadsFormatError(
            number, "`dependencies` is not a list of objects with depends_on_id and type")


def serialize(beads: BeadsFile) -> str:
    """The file as bd writes it: one line per item in the file's order, each ending in a
    newline, in the file's style."""
    return "".join(encode(item.fields, beads.style) + "\n" for item in beads.items)


def encode(value: Any, style: Style) -> str:
    if style == "spaced":
        return json.dumps(value, ensure_ascii=False)
    # Go's encoding/json: compact, UTF-8 as is, and HTML's special characters escaped.
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                          ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escaped)
    return text


def go_time(moment: datetime) -> str:
    """An instant as bd writes it: RFC 3339 in UTC, the fraction without trailing zeros."""
    utc = moment.astimezone(UTC)
    fraction = f"{utc.microsecond:06d}".rstrip("0")
    return utc.strftime("%Y-%m-%dT%H:%M:%S") + (f".{fraction}" if fraction else "") + "Z"


def with_fields(fields: Mapping[str, Any], changes: Mapping[str, Any],
                order: Sequence[str] = BD_FIELD_ORDER) -> dict[str, Any]:
    """`fields` with `changes` applied (None removes a field, as bd's omitempty leaves an
    empty one out): a present field keeps its place, a new one goes where `order` puts it."""
    rank = {name: index for index, name in enumerate(order)}
    result = dict(fields)
    for name, value in changes.items():
        if value is None:
            result.pop(name, None)
        elif name in result or name not in rank:
            result[name] = value
        else:
            keys = list(result)
            at = next((i for i, key in enumerate(keys)
                       if key in rank and rank[key] > rank[name]), len(keys))
            keys.insert(at, name)
            result = {key: value if key == name else result[key] for key in keys}
    return result


# --- readiness and the planning context ---

@dataclass(frozen=True)
class Blocker:
    item_id: str
    kind: str
    # None when the file does not hold it (another repository's item).
    item: WorkItem | None

    @property
    def open(self) -> bool:
        return self.item is not None and not self.item.closed


def blockers(item: WorkItem, by_id: Mapping[str, WorkItem]) -> list[Blocker]:
    """What the item waits for, each with its item when the file holds it."""
    return [Blocker(dep.depends_on_id, dep.kind, by_id.get(dep.depends_on_id))
            for dep in item.dependencies if dep.kind in BLOCKING_KINDS]


def is_ready(item: WorkItem, by_id: Mapping[str, WorkItem]) -> bool:
    """Open, and nothing it waits for is still open (bd's `ready`); a blocker the file does
    not hold is another repository's and cannot be judged here, so it does not hold it
    back."""
    return item.status == "open" and not any(b.open for b in blockers(item, by_id))


@dataclass(frozen=True)
class PlanningContext:
    item: WorkItem
    blockers: list[Blocker]
    # Every dependency of the item, blocking or not, with its item when the file holds it.
    dependencies: list[tuple[Dependency, WorkItem | None]]
    # Ready items that share its parent (or, for an item without one, a label), best first.
    ready_siblings: list[WorkItem]
    ready: bool


def planning_context(beads: BeadsFile, item_id: str,
                     max_siblings: int = MAX_SIBLINGS) -> PlanningContext:
    """What an agent working on `item_id` should know of the plan (seed 002's planning
    plane). Raises UnknownItem when the file does not hold it."""
    by_id = beads.by_id()
    if item_id not in by_id:
        raise UnknownItem(item_id)
    item = by_id[item_id]
    parent = item.parent
    if parent is not None:
        kin = [other for other in beads.items if other.parent == parent]
    else:
        kin = [other for other in beads.items if other.parent is None
               and set(other.labels) & set(item.labels)]
    siblings = sorted((other for other in kin
                       if other.id != item_id and is_ready(other, by_id)),
                      key=lambda other: (other.priority, other.id))
    return PlanningContext(
        item=item, blockers=blockers(item, by_id),
        dependencies=[(dep, by_id.get(dep.depends_on_id)) for dep in item.dependencies],
        ready_siblings=siblings[:max_siblings], ready=is_ready(item, by_id))


def listing(beads: BeadsFile) -> list[tuple[WorkItem, bool, list[Blocker]]]:
    """Every item with its readiness and its open blockers, in the file's order."""
    by_id = beads.by_id()
    return [(item, is_ready(item, by_id), [b for b in blockers(item, by_id) if b.open])
            for item in beads.items]


# --- what a run changes ---

@dataclass(frozen=True)
class Claim:
    item_id: str
    assignee: str
    at: datetime


@dataclass(frozen=True)
class Close:
    item_id: str
    reason: str
    at: datetime


@dataclass(frozen=True)
class Release:
    """A run that failed or was cancelled gives its item back: open again, unassigned, and
    why in its notes."""

    item_id: str
    note: str
    at: datetime


@dataclass(frozen=True)
class FollowUp:
    """Work a run found (a `next_steps` entry): a new item, `discovered-from` the run's."""

    from_item_id: str
    title: str
    description: str
    created_by: str
    at: datetime


Change = Claim | Close | Release | FollowUp


def apply(beads: BeadsFile, changes: Iterable[Change]) -> BeadsFile:
    """The file after `changes`, in order. A change to an item the file does not hold
    raises UnknownItem; a follow-up already filed (same id: same title, creator and time)
    is not filed twice, so applying the same changes again changes nothing."""
    for change in changes:
        beads = _applied(beads, change)
    return beads


def _applied(beads: BeadsFile, change: Change) -> BeadsFile:
    if isinstance(change, FollowUp):
        return _filed(beads, change)
    item = beads.item(change.item_id)
    at = go_time(change.at)
    if isinstance(change, Claim):
        fields = with_fields(item.fields, {"status": "in_progress", "assignee": change.assignee,
                                           "updated_at": at, "started_at": at})
    elif isinstance(change, Close):
        fields = with_fields(item.fields, {"status": "closed", "updated_at": at,
                                           "closed_at": at, "close_reason": change.reason})
    else:
        notes = "\n\n".join(part for part in (str(item.fields.get("notes") or ""),
                                              change.note) if part)
        fields = with_fields(item.fields, {"status": "open", "assignee": None,
                                           "notes": notes, "updated_at": at})
    return replace(beads, items=tuple(WorkItem(fields) if other.id == item.id else other
                                      for other in beads.items))


def _filed(beads: BeadsFile, change: FollowUp) -> BeadsFile:
    origin = beads.item(change.from_item_id)
    new_id = next_id(beads, prefix_of(origin.id), change)
    if new_id in beads.by_id():
        return beads
    at = go_time(change.at)
    dependency = {"issue_id": new_id, "depends_on_id": origin.id, "type": "discovered-from",
                  "created_at": at, "created_by": change.created_by}
    fields = with_fields({"id": new_id}, {
        "title": change.title, "description": change.description or None, "status": "open",
        "priority": origin.priority, "issue_type": "task", "created_at": at,
        "created_by": change.created_by, "updated_at": at, "dependencies": [dependency]})
    item = WorkItem(fields)
    if beads.sorted_by_id:
        items = sorted((*beads.items, item), key=lambda each: each.id)
    else:
        items = [*beads.items, item]
    return replace(beads, items=tuple(items))


def prefix_of(item_id: str) -> str:
    """The prefix of the item's tree: its root id without the last `-hash`."""
    root = item_id.split(".", 1)[0]
    return root.rsplit("-", 1)[0] if "-" in root else root


def next_id(beads: BeadsFile, prefix: str, change: FollowUp) -> str:
    """The id bd gives a new item: the next number in a file of sequential ids (bd's counter
    mode), else a hash of its content, as long as the prefix's item count asks for, the
    first of ten nonces per length that no item holds. A follow-up already filed keeps the
    id it was filed under."""
    for item in beads.items:
        if _is_filed(item, change):
            return item.id
    roots = [item.id[len(prefix) + 1:] for item in beads.items
             if item.id.startswith(prefix + "-") and "." not in item.id]
    if roots and all(root.isdigit() for root in roots):
        return f"{prefix}-{max(int(root) for root in roots) + 1}"
    taken = {item.id for item in beads.items}
    for length in range(adaptive_length(len(roots)), MAX_ID_LENGTH + 1):
        for nonce in range(10):
            candidate = f"{prefix}-{_id_from(change, nonce, length)}"
            if candidate not in taken:
                return candidate
    raise ValueError(f"no free id for a new item of prefix {prefix!r}")


def _is_filed(item: WorkItem, change: FollowUp) -> bool:
    return item.title == change.title and item.fields.get("created_at") == go_time(
        change.at) and Dependency(change.from_item_id, "discovered-from") in item.dependencies


def adaptive_length(count: int) -> int:
    for length in range(MIN_ID_LENGTH, MAX_ID_LENGTH + 1):
        if 1.0 - math.exp(-(count * count) / (2.0 * 36.0 ** length)) <= MAX_COLLISION:
            return length
    return MAX_ID_LENGTH


def _id_from(change: FollowUp, nonce: int, length: int) -> str:
    """bd's GenerateHashID: sha256 of `title|description|creator|unix nanos|nonce`, its first
    bytes in base36, the last `length` digits."""
    nanos = int(change.at.timestamp()) * 1_000_000_000 + change.at.microsecond * 1000
    content = f"{change.title}|{change.description}|{change.created_by}|{nanos}|{nonce}"
    number = int.from_bytes(hashlib.sha256(content.encode()).digest()[:_HASH_BYTES[length]],
                            "big")
    digits = ""
    while number > 0:
        number, digit = divmod(number, 36)
        digits = _BASE36[digit] + digits
    return digits.rjust(length, "0")[-length:]


def _section(text: str, title: str) -> str:
    """The body of the markdown section `title` (any heading level, any case), up to the
    next heading of its level or above."""
    lines = text.split("\n")
    for start, line in enumerate(lines):
        heading = _HEADING.match(line)
        if heading and heading.group(2).strip().rstrip(":").lower() == title:
            level = len(heading.group(1))
            body = []
            for following in lines[start + 1:]:
                other = _HEADING.match(following)
                if other and len(other.group(1)) <= level:
                    break
                body.append(following)
            return "\n".join(body).strip()
    return ""
