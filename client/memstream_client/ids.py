"""Deterministic identifiers: the same input gives the same id in every process, so that a
replay or a restart overwrites instead of duplicating."""

from __future__ import annotations

import hashlib


def _digest(*parts: str) -> str:
    # The unit separator cannot occur in a namespace, so ("a", "b|c") and ("a|b", "c") differ.
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:24]


def memory_record_id(namespace: str, event_id: str) -> str:
    return f"mem_{_digest('memory', namespace, event_id)}"


def digest_record_id(namespace: str, run_id: str) -> str:
    return f"dig_{_digest('run_digest', namespace, run_id)}"


def fix_pattern_record_id(namespace: str, signature_id: str) -> str:
    return f"fix_{_digest('fix_pattern', namespace, signature_id)}"


def change_event_id(record_id: str, version: int, change: str, cause: str | None = None) -> str:
    """A change is one version of a record, except those that leave the record as it is (a
    proposal, a rejected diff): the lifecycle event that caused it tells those apart."""
    parts = (record_id, str(version), change) if cause is None else \
        (record_id, str(version), change, cause)
    return f"chg_{_digest(*parts)}"


def consolidate_request_id(namespace: str, basis: str) -> str:
    """A counted request is named by what it is one of (its day, or the report it follows),
    so that asking again re-sends the same request instead of a new one."""
    return f"cns_{_digest('consolidate', namespace, basis)}"


def dead_letter_id(topic: str, partition: int, offset: int) -> str:
    """A dead letter is named by where its event was read."""
    return f"dlq_{_digest('dead_letter', topic, str(partition), str(offset))}"


def doc_chunk_record_id(namespace: str, doc_id: str, content_hash: str) -> str:
    """A chunk of a document is named by its document and its content: re-chunking the same
    text names the same chunks, and a chunk that did not change keeps its record."""
    return f"chk_{_digest('doc_chunk', namespace, doc_id, content_hash)}"


def session_memory_event_id(namespace: str, session_event_id: str, part: str) -> str:
    """The `memory.write` a session event asks for (a checkpoint's n-th memory, a sleep's
    handoff): named by that event, so a replayed session event writes the same memory."""
    return f"ses_{_digest('session_memory', namespace, session_event_id, part)}"


def learning_event_id(namespace: str, source: str) -> str:
    """The `memory.write` that proposes a run learning (a lesson of a fix pattern, a pattern
    of a task's runs): named by what it is learnt from, so it is proposed once."""
    return f"lrn_{_digest('run_learning', namespace, source)}"


def learning_update_event_id(namespace: str, source: str, text: str) -> str:
    """The `memory.update` that grows a run learning to `text`: the same evidence names the
    same update, so a replay applies it once."""
    return f"lrn_{_digest('run_learning_update', namespace, source, text)}"


def planning_event_id(namespace: str, *parts: str) -> str:
    """A planning event named by what it comes from: an item's content as read, or the run
    event (and the part of it) that asks for a write-back, so a replay publishes it again
    under the same id."""
    return f"pln_{_digest('planning', namespace, *parts)}"


def invalidation_event_id(write_event_id: str, older_id: str) -> str:
    """What a write does to an older memory it restates with another value (its version
    `invalidated`, or its pending diff): named by both, so a replayed write does it once."""
    return f"inv_{_digest('invalidation', write_event_id, older_id)}"
