"""The rules of a request's parameters and path segments: a read takes what a write takes
and refuses what a write refuses, and a route refuses what it does not take."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from multidict import MultiDict

from memstream_client.events import MEMORY_EVENT_TYPES
from processors.api.parameters import (
    BLOCK_LABEL,
    IDENTIFIER,
    NAMESPACE,
    TAG,
    VERSION,
    InvalidValue,
    api_key_id,
    instant,
    integer,
    number,
    one_of,
    text,
)
from processors.events.errors import Rejected
from processors.events.intake import parse_event
from streams.api.params import NO_PARAMS, READER_PARAMS, BadQuery, Param, check, repeated
from streams.api.queries import SEARCH_PARAMS


def written(**envelope: Any) -> bool:
    """Whether a memory.write with these envelope and payload fields passes intake."""
    payload = envelope.pop("payload", {})
    document = {"event_id": "e1", "type": "memory.write", "namespace": "team-a",
                "occurred_at": "2026-11-21T10:00:00+00:00", "producer": "tests",
                **envelope, "payload": {"text": "Deploys need the VPN.", **payload}}
    try:
        parse_event(json.dumps(document).encode(), MEMORY_EVENT_TYPES, 100_000)
    except Rejected:
        return False
    return True


def accepted(rule: Any, value: str) -> bool:
    try:
        rule(value)
    except InvalidValue:
        return False
    return True


names = st.text(max_size=300) | st.sampled_from(
    ["team-a", "a\x00", "a b", "", "x" * 128, "x" * 129, "ns:1.2_3-4", "é", "\ud800"])


@given(names)
def test_a_namespace_is_read_as_a_write_takes_it(namespace: str) -> None:
    assert accepted(NAMESPACE, namespace) == written(namespace=namespace)


@given(names)
def test_an_agent_id_is_read_as_a_write_takes_it(agent_id: str) -> None:
    assert accepted(IDENTIFIER, agent_id) == written(
        payload={"scope": "personal", "agent_id": agent_id})


@given(names)
def test_a_tag_is_read_as_a_write_takes_it(tag: str) -> None:
    assert accepted(TAG, tag) == written(payload={"tags": [tag]})


@pytest.mark.parametrize(("rule", "good", "bad"), [
    (NAMESPACE, ["team-a", "a", "A.b:c_d-e"], ["", "-a", "a b", "a\x00", "a/b", "x" * 129]),
    (IDENTIFIER, ["mem_0123", "ann", "a b", "ünïcode", "x" * 200],
     ["", "mem_\x00", "\ud800", "x" * 201]),
    (BLOCK_LABEL, ["human", "persona", "a-b_1"], ["Human", "", "1abc", "a\x00", "x" * 65]),
    (api_key_id, ["0123456789ab"], ["", "\x00", "0123456789AB", "0123456789abc", "../keys"]),
    (text(12), ["", "two\nlines", "KeyError\t'x'"], ["x" * 13, "q\x00", "\udc80"]),
    (one_of({"memory", "fix_pattern"}), ["memory"], ["", "Memory", "memory ", "bogus"]),
    (integer(1, 100), ["1", "100", " 7 ", "+5"], ["0", "101", "x", "", "1.5", "1e3", "9" * 5000,
                                                 "\u0661"]),  # an Arabic-Indic one
    (VERSION, ["1", str(2**31 - 1)], ["0", str(2**31), "-1"]),
    (number(-1.0, 1.0), ["0", "-1", "1", "0.25", "1e-3"], ["nan", "inf", "-inf", "2", "x", ""]),
])
def test_rules_take_and_refuse(rule: Any, good: list[str], bad: list[str]) -> None:
    assert [value for value in good if not accepted(rule, value)] == []
    assert [value for value in bad if accepted(rule, value)] == []


def test_a_time_is_iso_8601_in_utc_with_a_utc_form() -> None:
    assert instant("2026-01-01") == datetime(2026, 1, 1, tzinfo=UTC)
    assert instant("2026-01-01T12:00:00") == datetime(2026, 1, 1, 12, tzinfo=UTC)
    assert instant("2026-01-01T12:00:00+02:00") == datetime(2026, 1, 1, 10, tzinfo=UTC)
    for refused, reason in [("last week", "ISO 8601"), ("0001-01-01T00:00:00+14:00", "UTC form"),
                            ("9999-12-31T23:00:00-14:00", "UTC form"), ("", "ISO 8601")]:
        with pytest.raises(InvalidValue, match=reason):
            instant(refused)


def test_a_long_refused_value_is_cut_in_the_reason() -> None:
    with pytest.raises(InvalidValue) as refused:
        one_of({"memory"})("x" * 10_000)
    assert len(str(refused.value)) < 200


def query(*pairs: tuple[str, str]) -> MultiDict[str]:
    return MultiDict(pairs)


def test_a_route_takes_its_parameters_by_their_rules() -> None:
    check(SEARCH_PARAMS, {}, query(("namespace", "team-a"), ("query", "vpn"),
                                   ("kind", "memory,fix_pattern"), ("kind", "run_digest"),
                                   ("tag", "ops"), ("tag", "db"), ("limit", "5"),
                                   ("since", "2026-01-01")))


@pytest.mark.parametrize(("pairs", "message"), [
    ([("namespace", "team-a"), ("type", "fact")], "unknown parameter 'type'; this route takes "
                                                  "agent_id, as_of, expand, explain, kind, "
                                                  "limit, memory_type"),
    ([("namespace", "a"), ("as_of", "2999-01-01")], "as_of: must not be in the future"),
    ([("namespace", "a"), ("as_of", "last week")], "as_of: must be an ISO 8601 date or time"),
    ([("namespace", "a"), ("min_confidence", "1.5")], "min_confidence: must be a number from"),
    ([("namespace", "a"), ("expand", "4")], "expand: must be an integer from 0 to 3"),
    ([("namespace", "a\x00")], "namespace: holds U\\+0000"),
    ([("namespace", "a"), ("namespace", "b")], "namespace is given 2 times"),
    ([("namespace", "a"), ("kind", "memory,bogus")], "kind: unknown 'bogus'"),
    ([("namespace", "a"), ("memory_type", "gossip")], "memory_type: unknown 'gossip'"),
    ([("namespace", "a"), ("agent_id", "ann\x00")], "agent_id: holds U\\+0000"),
    ([("namespace", "a"), ("run_id", "x" * 201)], "run_id: String should have at most 200"),
    ([("namespace", "a"), ("limit", "101")], "limit: must be an integer from 1 to 100"),
    ([("namespace", "a"), ("explain", "yes")], "explain: must be true or false"),
    ([("namespace", "a"), ("until", "0001-01-01T00:00:00+01:00")], "until: the time has no UTC"),
    ([("namespace", "a"), ("\x00", "x")], r"unknown parameter '\\x00'"),
])
def test_a_route_refuses_what_it_does_not_take_saying_why(
        pairs: list[tuple[str, str]], message: str) -> None:
    with pytest.raises(BadQuery, match=message):
        check(SEARCH_PARAMS, {}, query(*pairs))


def test_an_empty_value_is_a_parameter_not_given() -> None:
    check(SEARCH_PARAMS, {}, query(("namespace", ""), ("limit", ""), ("kind", ",memory,")))
    assert repeated(query(("kind", ",memory,,"), ("kind", "memory")), "kind",
                    one_of({"memory"})) == ["memory"]


def test_path_segments_follow_their_rules_and_are_no_query_parameters() -> None:
    params = {**READER_PARAMS, "record_id": Param(IDENTIFIER)}
    check(params, {"record_id": "mem_1"}, query(("namespace", "a")))
    with pytest.raises(BadQuery, match="record_id: holds U\\+0000"):
        check(params, {"record_id": "mem_\x00"}, query())
    with pytest.raises(BadQuery, match="unknown parameter 'record_id'; this route takes "
                                       "agent_id, namespace"):
        check(params, {"record_id": "mem_1"}, query(("record_id", "mem_2")))
    with pytest.raises(BadQuery, match="takes no query parameters"):
        check(NO_PARAMS, {}, query(("x", "1")))
