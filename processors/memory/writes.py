"""Memory writes: the rules a memory.write must pass and the record it becomes."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from memstream_client.events import MemoryWrite, Provenance
from memstream_client.ids import memory_record_id
from memstream_client.links import wiki_links
from memstream_client.redaction import redact_secrets
from processors.events.errors import Rejected
from processors.text.lexical import CONTEXT_WEIGHTS
from schemas.records import Record


def memory_record(event: MemoryWrite, provenance: Provenance,
                  sanitized: Mapping[str, int] | None = None) -> Record:
    """The record a memory.write becomes, its text and title redacted of secrets; `sanitized`
    (characters intake removed or replaced, per field) is kept in its body."""
    payload = event.payload
    text = redact_secrets(payload.text)
    title = redact_secrets(payload.title) if payload.title else None
    redactions = text.found + (title.found if title else text.found.__class__())
    return Record(
        record_id=memory_record_id(event.namespace, event.event_id),
        namespace=event.namespace,
        record_kind="memory",
        scope=payload.record_scope,
        agent_id=payload.agent_id,
        title=title.text if title else None,
        text=text.text,
        body={"wiki_links": wiki_links(text.text), "redactions": dict(sorted(redactions.items())),
              **({"sanitized": dict(sorted(sanitized.items()))} if sanitized else {})},
        memory_type=payload.memory_type,
        tags=tuple(dict.fromkeys(payload.tags)),
        related_ids=tuple(dict.fromkeys(payload.related_ids)),
        tier=payload.tier,
        review_state=payload.review_state,
        trust_class=payload.trust_class,
        source_ref=payload.source_ref,
        thread=payload.thread,
        repo=payload.repo,
        security_scope=payload.security_scope,
        provenance=provenance,
        created_at=event.occurred_at,
        expires_at=payload.expires_at,
    )


# How much of each memory before it in its thread a memory keeps as its context.
CONTEXT_CHARS = 2000


def with_context(record: Record, previous: Record | None) -> Record:
    """`record` with the memories before it in its thread as its context (in its body,
    nearest first, as many as the lexical index weighs), which the lexical index reads
    beside its text: `previous` and the nearest of `previous`'s own context."""
    if previous is None:
        return record
    before = previous.body.get("context")
    earlier = before if isinstance(before, list) else []
    context = [{"record_id": previous.record_id, "text": previous.text[:CONTEXT_CHARS]},
               *earlier][: len(CONTEXT_WEIGHTS)]
    return record.model_copy(update={"body": {**record.body, "context": context}})


def check_references(record: Record, known_ids: Collection[str]) -> None:
    """Refuse a record whose related ids name records its namespace does not hold."""
    missing = [related for related in record.related_ids if related not in known_ids]
    if missing:
        raise Rejected(
            "broken_reference",
            f"related_ids not found in namespace {record.namespace!r}: {', '.join(missing)}",
        )
