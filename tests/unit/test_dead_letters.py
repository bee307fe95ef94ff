from dataclasses import replace
from datetime import UTC, datetime

from processors.events.dead_letters import DeadLetterEntry, dead_letter_entry
from processors.events.errors import Rejection
from streams.commands.replay_dead_letters import DeadLetter, Selection, parse_since
from streams.plumbing.dead_letters import (
    MAX_DLQ_VALUE_BYTES,
    dead_letter,
    headers_of,
    replay_command,
)
from streams.plumbing.messages import InboundMessage


def test_a_dead_letter_keeps_the_original_bytes_and_says_where_and_why() -> None:
    message = InboundMessage("memory.events", 3, 41, b"team-a", b"{broken")
    letter = dead_letter(message, Rejection("malformed_json", "Expecting value: line 1"))
    assert (letter.topic, letter.key, letter.value) == ("memory.events.dlq", b"team-a", b"{broken")
    assert dict(letter.headers) == {
        "dlq.reason": b"malformed_json",
        "dlq.error": b"Expecting value: line 1",
        "dlq.source.topic": b"memory.events",
        "dlq.source.partition": b"3",
        "dlq.source.offset": b"41",
        "dlq.truncated": b"false",
    }


def test_a_value_too_large_for_the_dlq_is_cut_and_marked() -> None:
    message = InboundMessage("runs.events", 0, 7, None, b"x" * (MAX_DLQ_VALUE_BYTES + 10))
    letter = dead_letter(message, Rejection("oversized", "too big"))
    assert len(letter.value) == MAX_DLQ_VALUE_BYTES
    assert dict(letter.headers)["dlq.truncated"] == b"true"


def kept(message: InboundMessage, at: datetime, **changes: object) -> DeadLetterEntry:
    """What the dead-letter stage keeps of the dead letter of `message`, read back at
    memory.events.dlq/0/5."""
    letter = dead_letter(message, Rejection("unknown_type", "type 'x' is not one"))
    read = InboundMessage(letter.topic, 0, 5, letter.key, letter.value, letter.headers)
    return replace(dead_letter_entry(read.topic, read.partition, read.offset, at, read.key,
                                     read.value or b"", headers_of(read)), **changes)


AT = datetime(2026, 5, 1, 12, 0, 0, 123000, tzinfo=UTC)


def test_a_dead_letter_read_back_says_where_its_event_was_read() -> None:
    entry = kept(InboundMessage("memory.events", 3, 41, b"team-a", b'{"type": "x"}'), AT)
    assert (entry.source_topic, entry.source_partition, entry.source_offset) == (
        "memory.events", 3, 41)
    assert (entry.reason, entry.error, entry.truncated) == (
        "unknown_type", "type 'x' is not one", False)


def test_the_replay_command_selects_the_dead_letter_by_topic_reason_and_time() -> None:
    entry = kept(InboundMessage("memory.events", 3, 41, b"team-a", b'{"type": "x"}'), AT)
    command = replay_command(entry)
    assert command == ("python -m streams.commands.replay_dead_letters --topic "
                       "memory.events.dlq --reason unknown_type --since 2026-05-01T12:00:00.123Z")
    # The command's own reading of --since selects this dead letter, not the one before it.
    since = parse_since(command.split("--since ")[1])
    at_ms = int(AT.timestamp() * 1000)
    letter = DeadLetter("memory.events.dlq", 0, 5, at_ms, b"team-a", b"{}",
                        {"dlq.reason": b"unknown_type"})
    selection = Selection(frozenset({"unknown_type"}), since)
    assert selection.wants(letter)
    assert not selection.wants(replace(letter, timestamp_ms=at_ms - 1))


def test_no_replay_command_for_what_the_command_would_skip() -> None:
    message = InboundMessage("memory.events", 3, 41, b"team-a", b'{"type": "x"}')
    assert replay_command(kept(message, AT, truncated=True)) is None
    assert replay_command(kept(message, AT, source_topic="runs.events")) is None
    # A reason that is not ours cannot be asked for: the command replays the topic's.
    assert replay_command(kept(message, AT, reason="unknown")) == (
        "python -m streams.commands.replay_dead_letters --topic memory.events.dlq "
        "--since 2026-05-01T12:00:00.123Z")
