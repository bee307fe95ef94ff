"""Whose key an MCP tool call runs with, and what a model is told when the API refuses it
(memstream_client/mcp_server)."""

from __future__ import annotations

import pytest

from memstream_client.mcp_server.callers import BearerCallers, ConfiguredCaller
from memstream_client.mcp_server.server import refusal
from memstream_client.sdk import (
    BadRequest,
    Config,
    NotFound,
    Unauthorized,
    Unavailable,
    Unreachable,
)

WORKER = "http://127.0.0.1:6066"


def test_an_http_request_runs_with_its_own_key_and_namespace() -> None:
    callers = BearerCallers(WORKER, default_namespace="team-a")
    client = callers.client({"authorization": "Bearer msk_abc_def",
                             "X-Memstream-Namespace": "team-b"})
    assert (client.config.url, client.config.key, client.config.namespace) == (
        WORKER, "msk_abc_def", "team-b")
    client = callers.client({"Authorization": "bearer msk_abc_def"})
    assert (client.config.key, client.config.namespace) == ("msk_abc_def", "team-a")


@pytest.mark.parametrize("headers", [None, {}, {"authorization": "Basic dXNlcjpwdw=="},
                                     {"authorization": "Bearer "},
                                     {"authorization": "Bearer   "}])
def test_an_http_request_without_a_key_is_refused_never_given_one(
    headers: dict[str, str] | None,
) -> None:
    with pytest.raises(Unauthorized) as refused:
        BearerCallers(WORKER, default_namespace="team-a").client(headers)
    assert refused.value.status == 401


def test_stdio_runs_with_the_settings_it_was_started_with_whatever_the_headers() -> None:
    caller = ConfiguredCaller(Config(WORKER, "msk_own_key", "team-a"))
    client = caller.client({"authorization": "Bearer msk_other_key"})
    assert (client.config.key, client.config.namespace) == ("msk_own_key", "team-a")


def test_a_refusal_says_what_the_api_said_and_whether_to_try_again() -> None:
    assert refusal(NotFound("no record 'mem_x' in 'team-a'", status=404)) == (
        "404 no record 'mem_x' in 'team-a'; do not retry as is")
    assert refusal(BadRequest("text is empty", status=400, reason="invalid_event")) == (
        "400 text is empty (invalid_event); do not retry as is")
    assert refusal(Unavailable("the broker did not acknowledge", status=503)) == (
        "503 the broker did not acknowledge; try again later")
    assert refusal(Unreachable("the worker is not reachable", sent=False)) == (
        "the worker is not reachable; try again later")
