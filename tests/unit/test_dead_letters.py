from processors.errors import Rejection
from streams.plumbing.dead_letters import MAX_DLQ_VALUE_BYTES, dead_letter
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
