"""The SDK's pure parts (memstream_client/sdk): each route's request, answers read into models or
errors, the settings' precedence, when a failed call is sent again; and both clients over a
mock transport, for the retries of a 503 and of a lost answer, which must resend the same
event id. The routes against the real stack: tests/integration/test_sdk.py."""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from memstream_client.answers.recall import SearchAnswer
from memstream_client.answers.records import Stats
from memstream_client.answers.review import AgentBlock
from memstream_client.sdk import (
    AsyncMemoryClient,
    BadRequest,
    ConfigError,
    MemoryClient,
    MemstreamError,
    NotFound,
    Retries,
    TimedOut,
    Unavailable,
    UnexpectedAnswer,
    Unreachable,
    routes,
)
from memstream_client.sdk._base import Call, answer_of
from memstream_client.sdk.client import AsyncRoute, Route
from memstream_client.sdk.config import Config
from memstream_client.sdk.errors import Forbidden, Unauthorized, error_of
from tests.openapi_structure import operations

CONFIG = Config("http://worker", "msk_k", "team-a")
NO_WAIT = Retries(attempts=3, first_delay_s=0.0)
ACCEPTED = {"namespace": "team-a", "event_id": "e1", "outcome": "pending",
            "outcome_url": "/v1/writes/e1?namespace=team-a", "topic": "memory.events"}
STORED = {**ACCEPTED, "outcome": "stored", "record_id": "mem_1", "version": 1,
          "decided_at": "2026-11-28T10:00:00+00:00"}
EVENT_ID = re.compile(r"^[0-9a-f]{32}$")

# One call of each route, as a client's method makes it.
SAMPLES: dict[str, Callable[[], Call[Any]]] = {
    "search": lambda: routes.search(CONFIG, "vpn"),
    "context": lambda: routes.context(CONFIG, "deploy"),
    "summary": lambda: routes.summary(CONFIG, "deploy", budget_tokens=200),
    "fix_patterns": lambda: routes.fix_patterns(CONFIG, "KeyError: 'x'"),
    "record": lambda: routes.record(CONFIG, "mem_1"),
    "records": lambda: routes.records(CONFIG, ["mem_1", "mem_2"]),
    "list_records": lambda: routes.list_records(CONFIG, tier="active", cursor="c"),
    "record_history": lambda: routes.record_history(CONFIG, "mem_1"),
    "record_diff": lambda: routes.record_diff(CONFIG, "mem_1"),
    "block": lambda: routes.block(CONFIG, "persona"),
    "pending_diffs": lambda: routes.pending_diffs(CONFIG),
    "review_queue": lambda: routes.review_queue(CONFIG),
    "stats": lambda: routes.stats(CONFIG),
    "changes": lambda: routes.changes(CONFIG),
    "graph": lambda: routes.graph(CONFIG),
    "neighbours": lambda: routes.neighbours(CONFIG, "mem_1", depth=2),
    "entities": lambda: routes.entities(CONFIG, prefix="pay"),
    "entity": lambda: routes.entity(CONFIG, "Payments gateway"),
    "consolidation_counts": lambda: routes.consolidation_counts(CONFIG),
    "consolidation_reports": lambda: routes.consolidation_reports(CONFIG),
    "runs": lambda: routes.runs(CONFIG),
    "run": lambda: routes.run(CONFIG, "run-1"),
    "dead_letters": lambda: routes.dead_letters(CONFIG),
    "dead_letter": lambda: routes.dead_letter(CONFIG, "dlq_1"),
    "keys": lambda: routes.keys(CONFIG),
    "key": lambda: routes.key(CONFIG, "0123456789ab"),
    "health": lambda: routes.health(CONFIG),
    "openapi": lambda: routes.openapi(CONFIG),
    "create_key": lambda: routes.create_key(CONFIG, "read"),
    "revoke_key": lambda: routes.revoke_key(CONFIG, "0123456789ab"),
    "write_memory": lambda: routes.write_memory(CONFIG, "Deploys need the VPN."),
    "update_memory": lambda: routes.update_memory(CONFIG, "mem_1", expected_version=1),
    "deprecate_memory": lambda: routes.deprecate_memory(CONFIG, "mem_1", reason="old"),
    "restore_memory": lambda: routes.restore_memory(CONFIG, "mem_1", version=1),
    "review": lambda: routes.review(CONFIG, "approve", record_id="mem_1"),
    "edit_block": lambda: routes.edit_block(CONFIG, "persona", set={"ROLE": "x"}),
    "run_event": lambda: routes.run_event(CONFIG, "run.started", {"run_id": "run-1"}),
    "wake": lambda: routes.wake(CONFIG, "fix the login test"),
    "checkpoint": lambda: routes.checkpoint(CONFIG, "ses-1", [{"text": "Deploys need the VPN."}]),
    "sleep": lambda: routes.sleep(CONFIG, "ses-1", "Fixed it.", next_steps=["Ship it."]),
    "session": lambda: routes.session(CONFIG, "ses-1"),
    "upsert_document": lambda: routes.upsert_document(CONFIG, "guide/install.md", "# Install"),
    "delete_document": lambda: routes.delete_document(CONFIG, "guide/install.md"),
    "documents": lambda: routes.documents(CONFIG, repo="encode/httpx"),
    "document": lambda: routes.document(CONFIG, "guide/install.md"),
    "planning_items": lambda: routes.planning_items(CONFIG, "memstream"),
    "planning_item": lambda: routes.planning_item(CONFIG, "memstream", "bd-2vh3.5"),
    "plan_sync": lambda: routes.plan_sync(CONFIG, "memstream"),
    "rate_memories": lambda: routes.rate_memories(CONFIG, {"mem_1": True}, gap="the VPN"),
    "memory_scores": lambda: routes.memory_scores(CONFIG, "mem_1"),
    "scoring_config": lambda: routes.scoring_config(CONFIG),
    "scoring_config_history": lambda: routes.scoring_config_history(CONFIG, limit=5),
    "set_scoring_config": lambda: routes.set_scoring_config(
        CONFIG, {"blend_boost_factor": 0.2}, expected_version=3),
    "gaps": lambda: routes.gaps(CONFIG, status="all", limit=5),
    "write_outcome": lambda: routes.write_outcome(CONFIG, "e1", wait_s=2),
}
# The API's routes no client method is for: the browser and Prometheus.
NOT_FOR_CLIENTS = re.compile(r"^/(ui|metrics)")


def api_routes(document: dict[str, Any]) -> set[tuple[str, str]]:
    """(method, route template) of every route the ingest app serves, from its OpenAPI
    document."""
    return {(method, path) for method, path, _ in operations(document)
            if not NOT_FOR_CLIENTS.match(path)}


def route_of(call: Call[Any], served: set[tuple[str, str]]) -> tuple[str, str] | None:
    """The served route a call reaches: its method, and a template its path fits."""
    for method, template in served:
        if method == call.method and re.fullmatch(re.sub(r"\{\w+\}", "[^/]+", template),
                                                  call.path):
            return method, template
    return None


def test_each_call_reads_the_answer_its_route_declares(
        wired: tuple[Any, dict[str, Any]]) -> None:
    """The SDK declares no answer model of its own: each call reads its route's answer into
    the very model the server renders it from (memstream_client/answers/), named by the document."""
    document = wired[1]
    served = api_routes(document)
    for name, sample in SAMPLES.items():
        call = sample()
        route = route_of(call, served)
        assert route is not None, name
        method, path = route
        answers = document["paths"][path][method.lower()]["responses"]
        # A write that waits for its outcome answers 200 (decided) or 202 (pending) alike.
        (answered,) = {status: answer for status, answer in answers.items()
                       if (status.startswith("2") and status != "200")
                       or (status == "200" and "202" not in answers)}.values()
        schema = answered["content"]["application/json"]["schema"]
        # A route may answer one of several models, as the call asks (GET /v1/records).
        declared = {one.get("$ref", "no model").rsplit("/", 1)[-1]
                    for one in schema.get("oneOf", [schema])}
        model = getattr(call.read, "__self__", call.read)
        if name == "openapi":
            # The document is read as the JSON it is, for a generator to take.
            assert (model, declared) == (dict, {"ApiDocument"})
            continue
        assert model.__module__.startswith("memstream_client.answers."), name
        assert model.__name__ in declared, f"{name}: reads {model.__name__}, not {declared}"


def test_every_route_of_the_api_has_a_method_in_both_clients(
        wired: tuple[Any, dict[str, Any]]) -> None:
    # A route's function: the client's settings, then the route's parameters, to a Call.
    builders = {name for name, function in inspect.getmembers(routes, inspect.isfunction)
                if list(inspect.signature(function).parameters)[:1] == ["config"]
                and inspect.signature(function).return_annotation.startswith("Call[")}
    assert set(SAMPLES) == builders
    assert {name for name, value in vars(MemoryClient).items()
            if isinstance(value, Route)} == builders
    assert {name for name, value in vars(AsyncMemoryClient).items()
            if isinstance(value, AsyncRoute)} == builders
    served = api_routes(wired[1])
    called = set()
    for name, sample in SAMPLES.items():
        call = sample()
        route = route_of(call, served)
        assert route is not None, f"{name}: no route serves {call.method} {call.path}"
        called.add(route)
    assert called == served, f"no method for {sorted(served - called)}"


def test_a_method_is_named_documented_and_signed_as_its_route() -> None:
    client = MemoryClient("http://worker", key="k", env={})
    assert client.search.__name__ == "search"
    assert client.search.__doc__ == routes.search.__doc__
    signature = inspect.signature(client.search)
    assert list(signature.parameters)[:2] == ["query", "namespace"]
    assert signature.return_annotation is SearchAnswer


def test_a_read_names_its_parameters_once_each_and_leaves_out_the_rest() -> None:
    call = routes.search(CONFIG, "vpn", kind=["memory", "fix_pattern"], tag="ops", limit=3,
                         min_score=0.25, since=datetime(2026, 5, 1, tzinfo=UTC))
    assert (call.method, call.path, call.body) == ("GET", "/v1/search", None)
    assert call.query == (("namespace", "team-a"), ("query", "vpn"), ("min_score", "0.25"),
                          ("limit", "3"), ("kind", "memory"), ("kind", "fix_pattern"),
                          ("tag", "ops"), ("since", "2026-05-01T00:00:00+00:00"))
    assert routes.stats(CONFIG, namespace="team-b").query == (("namespace", "team-b"),)
    assert routes.record_diff(CONFIG, "mem_1", from_version=1, to_version=2).query == (
        ("namespace", "team-a"), ("from", "1"), ("to", "2"))


def test_an_id_stays_one_segment_of_the_path() -> None:
    assert routes.record(CONFIG, "a/b c?d#e").path == "/v1/records/a%2Fb%20c%3Fd%23e"
    assert routes.run(CONFIG, "run/1").path == "/v1/runs/run%2F1"


def test_a_read_needs_a_namespace_the_dead_letters_and_all_namespaces_do_not() -> None:
    anywhere = Config("http://worker", "msk_k", None)
    with pytest.raises(ConfigError, match="no namespace"):
        routes.search(anywhere, "vpn")
    with pytest.raises(ConfigError, match="no namespace"):
        routes.keys(anywhere)
    assert routes.keys(anywhere, all_namespaces=True).query == ()
    assert routes.dead_letters(anywhere).query == ()
    assert routes.dead_letters(CONFIG).query == (("namespace", "team-a"),)
    assert routes.dead_letters(CONFIG, all_namespaces=True, reason="oversized").query == (
        ("reason", "oversized"),)
    assert routes.create_key(CONFIG, ["read", "write"], all_namespaces=True).body == {
        "permissions": ["read", "write"], "label": ""}


def test_a_write_carries_a_new_event_id_unless_given_and_only_the_fields_given() -> None:
    first = routes.write_memory(CONFIG, "Deploys need the VPN.", tags="ops",
                                expires_at=datetime(2027, 1, 1, tzinfo=UTC))
    assert first.body is not None and EVENT_ID.match(first.body["event_id"])
    assert first.body == {"namespace": "team-a", "event_id": first.body["event_id"],
                          "text": "Deploys need the VPN.", "tags": ["ops"],
                          "expires_at": "2027-01-01T00:00:00+00:00"}
    second = routes.write_memory(CONFIG, "Deploys need the VPN.")
    assert second.body is not None and second.body["event_id"] != first.body["event_id"]
    given = routes.update_memory(CONFIG, "mem_1", expected_version=2, text="New.",
                                 event_id="e-42")
    assert (given.path, given.body, given.answered_by) == (
        "/v1/memories/mem_1/update", {"namespace": "team-a", "event_id": "e-42",
                                      "expected_version": 2, "text": "New."},
        frozenset({200, 202}))
    # A write waits for its outcome, 5 s unless told otherwise; 0 answers at once.
    assert dict(given.query) == {"wait": "5.0"}
    assert dict(routes.write_memory(CONFIG, "Deploys need the VPN.", wait_s=0).query) == {
        "wait": "0"}
    block = routes.review(CONFIG, "reject", block=AgentBlock(agent_id="finn", label="human"),
                          diff_id="d1", event_id="e-43")
    assert block.body == {"namespace": "team-a", "event_id": "e-43", "decision": "reject",
                          "diff_id": "d1", "block": {"agent_id": "finn", "label": "human"}}
    edit = routes.edit_block(CONFIG, "human", agent_id="finn", set={"PREFS": ("a", "b")},
                             append={"CONTEXT": ["c"]}, event_id="e-44")
    assert edit.body == {"namespace": "team-a", "event_id": "e-44", "agent_id": "finn",
                         "set": {"PREFS": ["a", "b"]}, "append": {"CONTEXT": ["c"]}}
    assert all(SAMPLES[name]().repeatable for name in SAMPLES if name != "create_key")
    assert not SAMPLES["create_key"]().repeatable


def test_a_writes_links_close_its_text_as_wiki_links() -> None:
    call = routes.write_memory(CONFIG, "Deploys need the VPN.", links=["Project: Billing"])
    assert call.body is not None
    assert call.body["text"] == "Deploys need the VPN.\n\nLinks: [[Project: Billing]]"
    with pytest.raises(ValueError, match="not a link target"):
        routes.write_memory(CONFIG, "Deploys need the VPN.", links=["a|b"])


def test_an_answer_keeps_what_this_client_does_not_know() -> None:
    body = {"namespace": "team-a", "records": {"memory": 2}, "index_points": 2,
            "shards": 3}
    stats = answer_of(routes.stats(CONFIG), 200, json.dumps(body).encode(), "OK")
    assert isinstance(stats, Stats)
    assert (stats.records, stats.index_points, stats.shards, stats.raw) == (
        {"memory": 2}, 2, 3, body)


@pytest.mark.parametrize(("content", "expected"), [
    (b"<html>oops</html>", "GET /v1/stats: the answer is not JSON"),
    (b'{"namespace": "team-a"}', "GET /v1/stats: not the answer this client knows "
                                 "(records: Field required)"),
])
def test_an_answer_that_is_not_the_routes_is_unexpected(content: bytes, expected: str) -> None:
    with pytest.raises(UnexpectedAnswer) as raised:
        answer_of(routes.stats(CONFIG), 200, content, "OK")
    assert (str(raised.value), raised.value.status) == (expected, 200)


@pytest.mark.parametrize(("status", "body", "kind", "reason", "retriable"), [
    (400, {"error": "payload.text: too long", "reason": "invalid_event"}, BadRequest,
     "invalid_event", False),
    (400, {"error": "limit: not an integer"}, BadRequest, None, False),
    (401, {"error": "key 0123456789ab was revoked"}, Unauthorized, None, False),
    (403, {"error": "key 0123456789ab may not write in 'team-b'"}, Forbidden, None, False),
    (404, {"error": "no record 'mem_1' in 'team-a'"}, NotFound, None, False),
    (503, {"error": "Kafka is unavailable", "event_id": "e-9"}, Unavailable, None, True),
    (405, None, MemstreamError, None, False),
])
def test_an_error_carries_its_status_reason_and_whether_to_retry(
        status: int, body: dict[str, str] | None, kind: type[MemstreamError],
        reason: str | None, retriable: bool) -> None:
    content = b"405: Method Not Allowed" if body is None else json.dumps(body).encode()
    error = error_of(status, content, "Method Not Allowed")
    assert type(error) is kind
    assert (error.status, error.reason, error.retriable) == (status, reason, retriable)
    assert error.detail == (body["error"] if body else "405: Method Not Allowed")
    if isinstance(error, Unavailable):
        assert error.event_id == "e-9"


def test_settings_given_come_before_the_environment_and_the_file(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('url = "http://file:1"\nkey = "msk_file"\nnamespace = "from-file"\n')
    env = {"MEMSTREAM_CONFIG": str(config)}
    assert MemoryClient(env=env).config.key == "msk_file"
    env |= {"MEMSTREAM_API_KEY": "msk_env", "MEMSTREAM_NAMESPACE": "from-env"}
    from_env = MemoryClient(env=env).config
    assert (from_env.url, from_env.key, from_env.namespace) == (
        "http://file:1", "msk_env", "from-env")
    given = AsyncMemoryClient("http://given:2/", key="msk_given", namespace="given",
                              env=env).config
    assert (given.url, given.key, given.namespace) == ("http://given:2", "msk_given", "given")


def test_what_is_sent_again_and_after_how_long() -> None:
    retries = Retries(attempts=4, first_delay_s=0.5, max_delay_s=1.5)
    read, make_key = routes.stats(CONFIG), routes.create_key(CONFIG, "read")
    busy = Unavailable("busy", status=503)
    assert [retries.delay(read, busy, n) for n in range(5)] == [0.5, 1.0, 1.5, 1.5, None]
    assert retries.delay(read, NotFound("no", status=404), 0) is None
    lost = Unreachable("reset", sent=True)
    refused = Unreachable("refused", sent=False)
    assert retries.delay(read, lost, 0) == 0.5
    assert retries.delay(make_key, lost, 0) is None, "a key made twice is two keys"
    assert retries.delay(make_key, TimedOut("slow", sent=True), 0) is None
    assert retries.delay(make_key, refused, 0) == 0.5
    assert retries.delay(make_key, busy, 0) == 0.5, "a 503 made nothing"


class Worker:
    """A worker behind a mock transport: answers in turn (a status and body, or an
    exception to raise), and the requests it got."""

    def __init__(self, *answers: tuple[int, dict[str, Any]] | type[httpx.TransportError]
                 ) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, tuple):
            return httpx.Response(answer[0], json=answer[1])
        raise answer("injected", request=request)

    def bodies(self) -> list[Any]:
        return [json.loads(request.content) for request in self.requests]


def sync_client(worker: Worker) -> MemoryClient:
    return MemoryClient("http://worker", key="k", namespace="team-a", env={},
                        retries=NO_WAIT, transport=httpx.MockTransport(worker))


def test_a_write_answered_503_is_sent_again_with_the_same_event_id() -> None:
    worker = Worker((503, {"error": "Kafka is unavailable", "event_id": "x"}),
                    (503, {"error": "Kafka is unavailable", "event_id": "x"}), (200, STORED))
    written = sync_client(worker).write_memory("Deploys need the VPN.", tags=["ops"])
    assert (written.outcome, written.record_id, written.decided) == ("stored", "mem_1", True)
    first, *again = worker.bodies()
    assert EVENT_ID.match(first["event_id"]) and again == [first, first]


def test_a_write_whose_answer_was_lost_is_sent_again_as_the_same_event() -> None:
    worker = Worker(httpx.ReadTimeout, httpx.RemoteProtocolError, (202, ACCEPTED))
    sync_client(worker).write_memory("Deploys need the VPN.", event_id="e-1")
    assert [body["event_id"] for body in worker.bodies()] == ["e-1"] * 3


def test_retries_end_with_the_last_failure() -> None:
    worker = Worker(*[(503, {"error": "keys unavailable"})] * 4)
    with pytest.raises(Unavailable) as raised:
        sync_client(worker).stats()
    assert (raised.value.status, raised.value.retriable, len(worker.requests)) == (
        503, True, 4)
    not_found = Worker((404, {"error": "no record 'mem_1' in 'team-a'"}))
    with pytest.raises(NotFound):
        sync_client(not_found).record("mem_1")
    assert len(not_found.requests) == 1


def test_a_key_is_made_again_only_if_the_first_request_never_arrived() -> None:
    made = {"key_id": "0123456789ab", "namespace": "team-a", "permissions": ["read"],
            "agent_id": None, "label": "", "created_at": "2026-05-01T12:00:00+00:00",
            "revoked_at": None, "token": "msk_0123456789ab_secret"}
    refused = Worker(httpx.ConnectError, (201, made))
    assert sync_client(refused).create_key("read").token == made["token"]
    assert len(refused.requests) == 2
    lost = Worker(httpx.ReadError, (201, made))
    with pytest.raises(Unreachable) as raised:
        sync_client(lost).create_key("read")
    assert raised.value.sent and len(lost.requests) == 1


async def test_the_async_client_sends_a_write_again_as_the_same_event() -> None:
    worker = Worker(httpx.ConnectTimeout, (503, {"error": "Kafka is unavailable"}),
                    (202, {"event_id": "e-2", "run_id": "run-1"}))
    async with AsyncMemoryClient("http://worker", key="k", namespace="team-a", env={},
                                 retries=NO_WAIT,
                                 transport=httpx.MockTransport(worker)) as memory:
        accepted = await memory.run_event("run.started", {"run_id": "run-1"},
                                          event_id="e-2")
    assert (accepted.event_id, accepted.run_id) == ("e-2", "run-1")
    assert [body["event_id"] for body in worker.bodies()] == ["e-2"] * 3
    assert {request.headers["authorization"] for request in worker.requests} == {"Bearer k"}
