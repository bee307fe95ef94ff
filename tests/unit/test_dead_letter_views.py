"""The pure parts of `GET /v1/dead-letters` (streams/api/operations/dead_letters.py) and of
`memstream dead-letters`: the filters, the cursor, the JSON of one, the table at 80 columns."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from multidict import MultiDict

from memstream_client.cli.commands import Output, dead_letters, parser
from memstream_client.sdk import MemoryClient
from processors.api.parameters import InvalidValue
from processors.events.dead_letters import DeadLetterEntry, DeadLetterHeaders, dead_letter_entry
from stores.dead_letters import DeadLetterFilter, DeadLetterPosition
from streams.api.operations.dead_letters import (
    cursor_position,
    dead_letter_answer,
    dead_letter_filter,
    encode_cursor,
)
from streams.api.params import BadQuery

AT = datetime(2026, 5, 1, 12, 0, 0, 123000, tzinfo=UTC)
ENTRY = dead_letter_entry(
    "memory.events.dlq", 1, 7, AT, b"team-a", b'{"namespace": "team-a", "type": "nope"}',
    DeadLetterHeaders(reason=b"unknown_type", error=b"type 'nope' is not one",
                      source_topic=b"memory.events", source_partition=b"2",
                      source_offset=b"41", truncated=b"false"))


def test_no_filter_wants_every_dead_letter_of_the_scope() -> None:
    assert dead_letter_filter("team-a", MultiDict()) == DeadLetterFilter(namespace="team-a")
    assert dead_letter_filter(None, MultiDict()) == DeadLetterFilter()


def test_reasons_and_error_classes_narrow_each_other() -> None:
    query = MultiDict([("reason", "unknown_type,refused_by_store"), ("reason", "oversized"),
                       ("error_class", "Rejected"), ("topic", "runs.events"),
                       ("since", "2026-05-01T12:00:00Z")])
    assert dead_letter_filter("team-a", query) == DeadLetterFilter(
        namespace="team-a", reasons=frozenset({"unknown_type", "oversized"}),
        dlq_topics=frozenset({"runs.events.dlq"}), since=datetime(2026, 5, 1, 12, tzinfo=UTC))
    by_class = dead_letter_filter(None, MultiDict([("error_class", "StoreRefused"),
                                                   ("error_class", "Unexpected")]))
    assert by_class.reasons == {"refused_by_store", "internal_error"}
    disjoint = dead_letter_filter(None, MultiDict([("reason", "oversized"),
                                                   ("error_class", "Unexpected")]))
    assert disjoint.reasons == frozenset(), "both asked, none of both: none"


@pytest.mark.parametrize("query", [
    [("reason", "no_such_reason")], [("error_class", "KeyError")],
    [("topic", "memory.updated")], [("since", "yesterday")]])
def test_unknown_filters_are_bad_queries(query: list[tuple[str, str]]) -> None:
    with pytest.raises(BadQuery):
        dead_letter_filter(None, MultiDict(query))


def test_a_cursor_resumes_after_its_dead_letter() -> None:
    assert cursor_position(encode_cursor(ENTRY)) == DeadLetterPosition(AT, ENTRY.dead_letter_id)
    assert cursor_position("") is None
    for bad in ("not-a-cursor", "MjAyNi0wNS0wMVQxMjowMDowMA"):
        with pytest.raises(InvalidValue, match="not a cursor this listing gave"):
            cursor_position(bad)


def dead_letter_json(entry: DeadLetterEntry) -> dict[str, Any]:
    """A dead letter as the worker sends it."""
    answer: dict[str, Any] = json.loads(dead_letter_answer(entry).rendered())
    return answer


def test_a_dead_letter_as_json() -> None:
    assert dead_letter_json(ENTRY) == {
        "dead_letter_id": ENTRY.dead_letter_id,
        "dead_lettered_at": "2026-05-01T12:00:00.123000+00:00",
        "namespace": "team-a",
        "event_id": None,
        "source": {"topic": "memory.events", "partition": 2, "offset": 41},
        "dlq": {"topic": "memory.events.dlq", "partition": 1, "offset": 7},
        "key": "team-a",
        "reason": "unknown_type",
        "error": "type 'nope' is not one",
        "error_class": "Rejected",
        "retriable": False,
        "first_bytes": '{"namespace": "team-a", "type": "nope"}',
        "first_bytes_utf8": True,
        "size": 39,
        "truncated": False,
        "replay_command": "python -m streams.commands.replay_dead_letters --topic "
                          "memory.events.dlq --reason unknown_type --since "
                          "2026-05-01T12:00:00.123Z",
    }


class Answering:
    """A worker that answers every request with `answer`, and remembers what it was asked
    (path, query pairs)."""

    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        self.asked: list[tuple[str, list[tuple[str, str]]]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.asked.append((request.url.path, request.url.params.multi_items()))
        return httpx.Response(200, json=self.answer)

    def client(self) -> MemoryClient:
        return MemoryClient("http://x", key="k", namespace="team-a", env={},
                            transport=httpx.MockTransport(self))


def test_the_cli_lists_dead_letters_in_80_columns() -> None:
    slow = {**dead_letter_json(ENTRY), "reason": "invalid_transition",
            "source": {"topic": "memory.consolidate", "partition": 0, "offset": 1},
            "key": "a-rather-long-namespace-key", "first_bytes": "{" + "x" * 600}
    api = Answering({"namespace": "team-a", "dead_letters": [dead_letter_json(ENTRY), slow],
                     "total": 12, "by_reason": {}, "next": "abc"})
    out, err = io.StringIO(), io.StringIO()
    output = Output(out, err, as_json=False)
    output.width = 80
    args = parser().parse_args(["dead-letters", "--limit", "2", "--reason", "unknown_type"])
    client = api.client()
    assert dead_letters(client, args, client.config, output) == 0
    assert api.asked == [("/v1/dead-letters", [
        ("namespace", "team-a"), ("reason", "unknown_type"), ("limit", "2")])]
    lines = out.getvalue().splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    assert lines[0].split() == ["time", "topic", "reason", "key", "bytes"]
    assert lines[1].startswith("2026-05-01 12:00:00  memory.events       unknown_type")
    assert lines[1].split()[-2:] == ["team-a", '{"namesp…']
    assert "memory.consolidate  invalid_transition" in lines[2] and lines[2].endswith("…")
    assert err.getvalue() == "2 of 12 dead letters; older ones: --before abc\n"
    everyone = parser().parse_args(["dead-letters", "--all-namespaces"])
    dead_letters(client, everyone, client.config, output)
    assert "namespace" not in dict(api.asked[-1][1])
