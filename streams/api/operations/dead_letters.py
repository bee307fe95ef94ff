"""`GET /v1/dead-letters`: the dead letters of every topic, newest first, as the dead-letter
stage keeps them (streams/stages/dead_letter_log.py), each with the command that replays it,
and how many there are in all and by reason; `GET /v1/dead-letters/{id}`: one of them.

Only admin keys bound to no agent read them (processors/events/dead_letters.py): a namespace's, its
dead letters; an operator's, every namespace's and those of none. One the key may not see is
answered as a missing one."""

from __future__ import annotations

from typing import Any

from faust.web import Request, Response, View

from memstream_client.answers.operations import DeadLetter, DeadLetterList, TopicPosition
from processors.api import cursors
from processors.api.access import Caller
from processors.api.parameters import IDENTIFIER, NAMESPACE, instant, integer, one_of, opaque
from processors.events.dead_letters import (
    ERROR_CLASSES,
    REASONS,
    DeadLetterEntry,
    dead_letter_scope,
    may_see,
)
from schemas.topics import INPUT_TOPICS, dead_letter_topic
from stores.dead_letters import DeadLetterFilter, DeadLetterPosition, DeadLetters
from streams.api.pages import Pages
from streams.api.params import Param, Params, optional, repeated, value
from streams.plumbing.dead_letters import replay_command

# Dead letters answered per request, by default and at most.
DEAD_LETTERS_LIMIT = 50
MAX_DEAD_LETTERS_LIMIT = 500
LIMIT = integer(1, MAX_DEAD_LETTERS_LIMIT)
REASON = one_of(REASONS)
ERROR_CLASS = one_of(ERROR_CLASSES)
TOPIC = one_of(INPUT_TOPICS)


def wire_dead_letters(pages: Pages, dead_letters: DeadLetters) -> None:
    @pages.page("/v1/dead-letters", params=DEAD_LETTERS_PARAMS, answer=DeadLetterList)
    async def dead_letters_view(web: View, request: Request, caller: Caller) -> DeadLetterList:
        """The dead letters the key may read, newest first, and how many in all and by
        reason."""
        query = request.query
        namespace = dead_letter_scope(caller, optional(query, "namespace", NAMESPACE))
        wanted = dead_letter_filter(namespace, query)
        before = optional(query, "before", cursor_position)
        limit = value(query, "limit", LIMIT, DEAD_LETTERS_LIMIT)
        # One more than asked: whether there is a next page.
        found = await dead_letters.dead_letters(wanted, before, limit + 1)
        by_reason = await dead_letters.dead_letter_counts(wanted)
        shown = found[:limit]
        return DeadLetterList(
            namespace=namespace,
            dead_letters=[dead_letter_answer(entry) for entry in shown],
            total=sum(by_reason.values()),
            by_reason=dict(by_reason),
            next=encode_cursor(shown[-1]) if len(found) > limit else None,
        )

    @pages.page("/v1/dead-letters/{dead_letter_id}", params=DEAD_LETTER_PARAMS,
                answer=DeadLetter)
    async def dead_letter_view(web: View, request: Request, caller: Caller,
                               dead_letter_id: str) -> DeadLetter | Response:
        """One dead letter, with the command that replays it."""
        found = await dead_letters.dead_letter(dead_letter_id)
        if found is None or not may_see(caller, found):
            return web.json({"error": f"no dead letter {dead_letter_id!r}"}, status=404)
        return dead_letter_answer(found)


def dead_letter_filter(namespace: str | None, query: Any) -> DeadLetterFilter:
    """The filters of a listing: `reason` and `error_class` (each repeatable; a dead letter
    of both kinds asked), source `topic`, `since` (an ISO 8601 time)."""
    reasons = set(repeated(query, "reason", REASON))
    classes = repeated(query, "error_class", ERROR_CLASS)
    wanted_reasons: frozenset[str] | None = None
    if reasons or classes:
        of_classes = set().union(*(ERROR_CLASSES[name] for name in classes))
        wanted_reasons = frozenset(reasons & of_classes if reasons and classes
                                   else reasons or of_classes)
    topics = repeated(query, "topic", TOPIC)
    return DeadLetterFilter(
        namespace=namespace, reasons=wanted_reasons,
        dlq_topics=frozenset(dead_letter_topic(topic) for topic in topics),
        since=optional(query, "since", instant))


def dead_letter_answer(entry: DeadLetterEntry) -> DeadLetter:
    return DeadLetter(
        dead_letter_id=entry.dead_letter_id,
        dead_lettered_at=entry.dead_lettered_at,
        namespace=entry.namespace,
        event_id=entry.event_id,
        source=TopicPosition(topic=entry.source_topic, partition=entry.source_partition,
                             offset=entry.source_offset),
        dlq=TopicPosition(topic=entry.dlq_topic, partition=entry.dlq_partition,
                          offset=entry.dlq_offset),
        key=entry.key,
        reason=entry.reason,
        error=entry.error,
        error_class=entry.error_class,
        retriable=entry.retriable,
        first_bytes=entry.head,
        first_bytes_utf8=entry.head_utf8,
        size=entry.size,
        truncated=entry.truncated,
        replay_command=replay_command(entry),
    )


def encode_cursor(entry: DeadLetterEntry) -> str:
    return cursors.encode_cursor(entry.dead_lettered_at, entry.dead_letter_id)


def cursor_position(cursor: str) -> DeadLetterPosition | None:
    """The position a cursor of `encode_cursor` stands for; None for no cursor."""
    if not cursor.strip():
        return None
    return cursors.position_of(cursor, 1, "listing", lambda at, keys: DeadLetterPosition(
        at, IDENTIFIER(keys[0])))


DEAD_LETTERS_PARAMS: Params = {
    "namespace": Param(NAMESPACE), "reason": Param(REASON, repeats=True),
    "error_class": Param(ERROR_CLASS, repeats=True), "topic": Param(TOPIC, repeats=True),
    "since": Param(instant), "limit": Param(LIMIT),
    "before": Param(opaque(cursor_position, "the cursor of a listing's last dead letter"))}
DEAD_LETTER_PARAMS: Params = {"dead_letter_id": Param(IDENTIFIER)}
