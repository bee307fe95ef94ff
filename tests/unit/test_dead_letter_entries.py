"""What is kept of a dead letter (processors/events/dead_letters.py): its id, its redacted first
bytes, its namespace, its error class, and who may see it."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest

from memstream_client.ids import dead_letter_id
from memstream_client.redaction import redact_secrets
from processors.api.access import Caller, Forbidden
from processors.events.dead_letters import (
    ERROR_CLASSES,
    HEAD_BYTES,
    REASONS,
    REDACTION_WINDOW,
    DeadLetterEntry,
    DeadLetterHeaders,
    dead_letter_entry,
    dead_letter_scope,
    event_id_of,
    may_see,
    namespace_of,
    payload_head,
    personal_agent_of,
)

AT = datetime(2026, 5, 1, 12, 0, 0, 123000, tzinfo=UTC)
HEADERS = DeadLetterHeaders(
    reason=b"unknown_type", error=b"type 'memory.wirte' is not one of memory.write",
    source_topic=b"memory.events", source_partition=b"2", source_offset=b"41",
    truncated=b"false")


def entry(value: bytes, headers: DeadLetterHeaders = HEADERS, key: bytes | None = b"team-a",
          offset: int = 7) -> DeadLetterEntry:
    return dead_letter_entry("memory.events.dlq", 1, offset, AT, key, value, headers)


def test_a_dead_letter_is_named_by_where_its_event_was_read() -> None:
    value = json.dumps({"type": "memory.wirte", "namespace": "team-a"}).encode()
    first = dead_letter_entry("memory.events.dlq", 1, 7, AT, b"team-a", value, HEADERS)
    # The same event dead-lettered again lands elsewhere in the DLQ, under the same id.
    again = dead_letter_entry("memory.events.dlq", 3, 90, AT, b"team-a", value, HEADERS)
    assert first.dead_letter_id == again.dead_letter_id == dead_letter_id(
        "memory.events", 2, 41)
    assert (first.source_topic, first.source_partition, first.source_offset) == (
        "memory.events", 2, 41)
    assert (first.dlq_topic, first.dlq_partition, first.dlq_offset) == (
        "memory.events.dlq", 1, 7)
    assert (first.reason, first.namespace, first.key, first.size, first.truncated) == (
        "unknown_type", "team-a", "team-a", len(value), False)
    assert first.error == "type 'memory.wirte' is not one of memory.write"
    assert (first.error_class, first.retriable) == ("Rejected", False)


def test_a_dead_letter_whose_headers_do_not_say_where_is_named_by_its_place_in_the_dlq() -> None:
    bare = dead_letter_entry("memory.events.dlq", 1, 7, AT, None, b"{}", DeadLetterHeaders())
    assert bare.dead_letter_id == dead_letter_id("memory.events.dlq", 1, 7)
    assert (bare.source_topic, bare.source_partition, bare.source_offset) == (None, None, None)
    assert (bare.reason, bare.error, bare.key) == ("unknown", "", None)
    assert (bare.error_class, bare.retriable) == (None, None)
    odd = dead_letter_entry("memory.events.dlq", 1, 8, AT, None, b"{}", DeadLetterHeaders(
        source_topic=b"memory.events", source_partition=b"two", source_offset=b"41",
        truncated=b"true"))
    assert odd.dead_letter_id == dead_letter_id("memory.events.dlq", 1, 8)
    assert (odd.source_topic, odd.source_partition, odd.truncated) == (
        "memory.events", None, True)


def test_only_the_first_bytes_are_kept_redacted_even_a_secret_the_cut_would_split() -> None:
    token = "ghp_" + "A1b2C3d4" * 5
    prefix = '{"text": "' + "x" * (HEAD_BYTES - 10 - 24) + " "
    value = f'{prefix}{token} and more"}}'.encode()
    # Cut first, the token's first 23 characters would stay, too short to be recognised.
    assert "ghp_A1b2" in redact_secrets(value[:HEAD_BYTES].decode()).text
    head, utf8 = payload_head(value)
    assert utf8
    assert len(head.encode()) <= HEAD_BYTES
    assert head == f'{prefix}[REDACTED:github_token] and more"}}'[:HEAD_BYTES]
    short, _ = payload_head(b'{"password": "hunter22"}')
    assert short == '{"password": "[REDACTED:assigned_secret]"}'


def test_what_redaction_shrinks_is_made_up_from_further_in_the_value() -> None:
    key = ("-----BEGIN RSA PRIVATE KEY-----\n" + "MIIEpAIBAAKCAQEA" * 300
           + "\n-----END RSA PRIVATE KEY-----")
    token = "ghp_" + "A1b2C3d4" * 5
    value = json.dumps({"key": key, "note": f"after the key, {token} then more"}).encode()
    assert value.index(b"ghp_") > REDACTION_WINDOW, "past the first window"
    head, _ = payload_head(value)
    assert head == ('{"key": "[REDACTED:private_key]", "note": "after the key, '
                    '[REDACTED:github_token] then more"}')


def test_a_long_value_is_redacted_only_as_far_as_its_head_needs() -> None:
    # The redaction rules are slow on runs of word characters and dots: seconds for 900 KiB.
    value = b"a.-" * 300_000
    started = time.perf_counter()
    head, _ = payload_head(value)
    assert head == value[:HEAD_BYTES].decode()
    assert time.perf_counter() - started < 1.0


def test_bytes_that_are_not_utf8_are_shown_escaped_and_flagged() -> None:
    head, utf8 = payload_head(b'{"text": "caf\xe9\x00"}')
    assert not utf8
    assert head == '{"text": "caf\\xe9\\x00"}'
    nul_only, utf8 = payload_head(b'{"text": "a\x00b"}')
    assert utf8
    assert nul_only == '{"text": "a\\x00b"}', "Postgres text cannot hold U+0000"


def test_the_head_is_cut_on_a_whole_character() -> None:
    head, utf8 = payload_head("é".encode() * HEAD_BYTES)
    assert utf8
    assert head == "é" * (HEAD_BYTES // 2)


def test_keys_and_errors_are_redacted_too() -> None:
    found = entry(b"{}", DeadLetterHeaders(reason=b"internal_error",
                                           error=b"ValueError: password=hunter22 refused"),
                  key=b"api_key=abcd1234")
    assert found.key == "api_key=[REDACTED:assigned_secret]"
    assert found.error == "ValueError: password=[REDACTED:assigned_secret] refused"
    assert (found.error_class, found.retriable) == ("Unexpected", True)


@pytest.mark.parametrize(("value", "namespace"), [
    (b'{"namespace": "team-a", "type": "nope"}', "team-a"),
    (b'{"namespace": "team-a", "payload": "not an object"}', "team-a"),
    (b'{"namespace": "team a"}', None),  # not a valid namespace
    (b'{"namespace": ""}', None),
    (b'{"namespace": 7}', None),
    (b'{"type": "memory.write"}', None),
    (b'["team-a"]', None),
    (b'team-a|{"namespace": "team-a"', None),
    (b'{"namespace": "team-a", "x": "\xff"}', None),
    (b"", None),
])
def test_a_namespace_is_attributed_only_when_the_value_names_a_valid_one(
        value: bytes, namespace: str | None) -> None:
    assert namespace_of(value) == namespace


@pytest.mark.parametrize(("value", "event_id", "agent"), [
    (b'{"event_id": "e1", "type": "memory.write", "payload": {"scope": "personal", '
     b'"agent_id": "ann", "text": "x"}}', "e1", "ann"),
    (b'{"event_id": "e2", "payload": {"scope": "user", "agent_id": "ann"}}', "e2", "ann"),
    (b'{"event_id": "e3", "payload": {"scope": "shared", "agent_id": "ann"}}', "e3", None),
    (b'{"event_id": "e4", "payload": {"scope": "personal"}}', "e4", None),
    # A session is its agent's, whatever its memories' scopes.
    (b'{"event_id": "e5", "type": "session.checkpointed", "payload": {"agent_id": "bob", '
     b'"memories": [{"text": "x", "scope": "shared"}]}}', "e5", "bob"),
    (b'{"event_id": "e6", "type": "run.started", "payload": {"agent_id": "bob"}}', "e6",
     None),
    (b'{"event_id": "", "payload": {"scope": "personal", "agent_id": ""}}', None, None),
    (b'{"event_id": "e8", "payload": {"scope": "personal", "agent_id": 7', None, None),
])
def test_a_dead_letter_names_its_event_and_the_agent_it_is_personal_to(
        value: bytes, event_id: str | None, agent: str | None) -> None:
    assert (event_id_of(value), personal_agent_of(value)) == (event_id, agent)
    assert (entry(value).event_id, entry(value).personal_agent) == (event_id, agent)


def test_every_reason_has_one_error_class() -> None:
    classes = [name for reason in REASONS for name, reasons in ERROR_CLASSES.items()
               if reason in reasons]
    assert len(classes) == len(REASONS)
    assert ERROR_CLASSES["StoreRefused"] == {"refused_by_store"}
    assert ERROR_CLASSES["Unexpected"] == {"internal_error"}
    assert {"malformed_json", "unknown_type", "stale_version"} <= ERROR_CLASSES["Rejected"]


OPERATOR = Caller("op", None, frozenset({"admin"}), None)
TEAM_ADMIN = Caller("ta", "team-a", frozenset({"admin"}), None)


def test_a_namespace_admin_sees_its_namespace_and_an_operator_every_one() -> None:
    assert dead_letter_scope(TEAM_ADMIN, None) == "team-a"
    assert dead_letter_scope(TEAM_ADMIN, "team-a") == "team-a"
    assert dead_letter_scope(OPERATOR, None) is None
    assert dead_letter_scope(OPERATOR, "team-b") == "team-b"
    with pytest.raises(Forbidden):
        dead_letter_scope(TEAM_ADMIN, "team-b")


@pytest.mark.parametrize("caller", [
    Caller("r", "team-a", frozenset({"read", "write", "review"}), None),
    Caller("ba", "team-a", frozenset({"admin"}), "finn"),  # would read other agents' bytes
    Caller("opr", None, frozenset({"read"}), None),
])
def test_keys_that_are_not_admins_of_every_agent_see_no_dead_letters(caller: Caller) -> None:
    with pytest.raises(Forbidden):
        dead_letter_scope(caller, "team-a")


def test_a_dead_letter_of_no_namespace_is_an_operators_only() -> None:
    ours = entry(b'{"namespace": "team-a"}')
    theirs = entry(b'{"namespace": "team-b"}')
    nobodys = entry(b"{broken")
    assert [may_see(TEAM_ADMIN, e) for e in (ours, theirs, nobodys)] == [True, False, False]
    assert [may_see(OPERATOR, e) for e in (ours, theirs, nobodys)] == [True, True, True]
