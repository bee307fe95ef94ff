"""The topic catalogue: every topic memstream reads or writes, as declared in
`infra/kafka/topics.json` (the one declaration: name, key, partitions, replication, config).

Code names topics through the constants below, never through string literals; each constant
is checked against the declaration when this module loads, so a topic renamed or removed in
the file fails at import, not at the first message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memstream_client.events import (
    ConsolidateRequest,
    DocumentEvent,
    MemoryEvent,
    PlanningEvent,
    RunEvent,
    SessionEvent,
)

TOPICS_FILE = Path(__file__).resolve().parent.parent / "infra" / "kafka" / "topics.json"
DLQ_SUFFIX = ".dlq"


@dataclass(frozen=True)
class TopicSpec:
    """One topic as declared in infra/kafka/topics.json."""

    name: str
    partitions: int
    replication: int
    config: dict[str, str] = field(default_factory=dict)
    key: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("topic name is empty")
        if self.partitions < 1:
            raise ValueError(f"{self.name}: partitions must be >= 1, got {self.partitions}")
        if self.replication < 1:
            raise ValueError(f"{self.name}: replication must be >= 1, got {self.replication}")


def read_topic_specs(path: Path = TOPICS_FILE, partitions: int | None = None) -> list[TopicSpec]:
    """The declared topics; each inherits `defaults` (partitions, replication, config) and may
    override them; `partitions`, when given, overrides every topic's count."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(doc, Mapping) or not isinstance(doc.get("topics"), list):
        raise ValueError(f"{path}: expected an object with a 'topics' list")
    defaults = doc.get("defaults") or {}
    if not isinstance(defaults, Mapping):
        raise ValueError(f"{path}: 'defaults' must be an object")
    default_partitions = _int(f"{path}: defaults.partitions", defaults.get("partitions", 1))
    default_replication = _int(f"{path}: defaults.replication", defaults.get("replication", 1))
    default_config = _str_config(f"{path}: defaults", defaults.get("config"))

    specs: list[TopicSpec] = []
    seen: set[str] = set()
    for entry in doc["topics"]:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise ValueError(f"{path}: every topic needs a 'name': {entry!r}")
        name: str = entry["name"]
        if name in seen:
            raise ValueError(f"{path}: topic {name!r} is declared twice")
        seen.add(name)
        where = f"{path}: {name}"
        specs.append(TopicSpec(
            name,
            partitions if partitions is not None
            else _int(where, entry.get("partitions", default_partitions)),
            _int(where, entry.get("replication", default_replication)),
            {**default_config, **_str_config(where, entry.get("config"))},
            str(entry.get("key", "")),
        ))
    return specs


def _str_config(where: str, raw: Any) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: config must be an object")
    return {str(k): str(v) for k, v in raw.items()}


def _int(where: str, raw: Any) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int | str):
        raise ValueError(f"{where}: expected an integer, got {raw!r}")
    return int(raw)


_DECLARED = frozenset(spec.name for spec in read_topic_specs())


def _declared(name: str) -> str:
    if name not in _DECLARED:
        raise LookupError(f"topic {name!r} is not declared in {TOPICS_FILE}")
    return name


def dead_letter_topic(topic: str) -> str:
    """The DLQ of an input topic."""
    return _declared(f"{topic}{DLQ_SUFFIX}")


def source_of_dead_letters(dlq: str) -> str:
    """The input topic whose dead letters `dlq` holds."""
    if not dlq.endswith(DLQ_SUFFIX):
        raise LookupError(f"{dlq!r} is not a dead-letter topic")
    return _declared(dlq.removesuffix(DLQ_SUFFIX))


RUNS_EVENTS = _declared("runs.events")
MEMORY_EVENTS = _declared("memory.events")
MEMORY_UPDATED = _declared("memory.updated")
MEMORY_CONSOLIDATE = _declared("memory.consolidate")
SESSIONS_EVENTS = _declared("sessions.events")
DOCUMENTS_EVENTS = _declared("documents.events")
PLANNING_EVENTS = _declared("planning.events")
# The topics workers consume; each has a dead-letter topic.
INPUT_TOPICS = (RUNS_EVENTS, MEMORY_EVENTS, MEMORY_CONSOLIDATE, SESSIONS_EVENTS,
                DOCUMENTS_EVENTS, PLANNING_EVENTS)
DEAD_LETTER_TOPICS = tuple(dead_letter_topic(topic) for topic in INPUT_TOPICS)


def destination(event: RunEvent | MemoryEvent | ConsolidateRequest | SessionEvent
                | DocumentEvent | PlanningEvent) -> tuple[str, bytes]:
    """The topic an event is published to, and its message key: a run's events by run_id
    (one run's events in order, runs spread over partitions), a session's by session_id, a
    repository's planning by the repo; memory events and consolidation requests by namespace
    (one namespace's changes in order), documents by namespace (one namespace's versions of a
    document in order)."""
    if isinstance(event, DocumentEvent):
        return DOCUMENTS_EVENTS, event.namespace.encode()
    if isinstance(event, PlanningEvent):
        return PLANNING_EVENTS, event.payload.repo.encode()
    if isinstance(event, SessionEvent):
        return SESSIONS_EVENTS, event.payload.session_id.encode()
    if isinstance(event, ConsolidateRequest):
        return MEMORY_CONSOLIDATE, event.namespace.encode()
    if isinstance(event, RunEvent):
        return RUNS_EVENTS, event.payload.run_id.encode()
    return MEMORY_EVENTS, event.namespace.encode()
