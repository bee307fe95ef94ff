"""API keys on the real stack: every route but /healthz and /metrics wants one; a key acts
within its namespace and permissions; a key bound to an agent never sees another agent's
personal memories; a revoked key stops at once; no token is logged or kept in clear."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.kafka_io import Received, TopicReader
from harness.stack import Stack, Worker
from processors.recall.summary import RECORD_ID
from publisher.kafka_publisher import Publisher
from stores.api_keys import PostgresApiKeys
from stores.postgres.migrate import apply_migrations
from streams.api.auth import Authenticator
from streams.plumbing.config import REPO_ROOT
from streams.worker import make_development_key
from tests.openapi_structure import operations
from tests.wired_app import wired_ingest

pytestmark = pytest.mark.integration

AGENTS = ("ann", "bob", "cy")
SECRET_TOPIC = "the rotation schedule of the pager"


def authenticated_routes() -> list[str]:
    """Every route the worker serves with a key, as the app registers them (its OpenAPI
    document), so that a route added later is covered too."""
    _, document = wired_ingest()
    return sorted({path for _, path, operation in operations(document)
                   if operation["security"] != []})


def concrete(route: str) -> str:
    """The route with ids of the forms it takes (a key id is 12 hexadecimal digits)."""
    return re.sub(r"\{([a-z_]+)\}", lambda found: "0123456789ab" if found[1] == "key_id"
                  else "some-id", route)


@dataclass(frozen=True)
class Vaults:
    namespace: str
    # agent -> the record ids of its personal memories
    personal: dict[str, list[str]]
    shared: list[str]
    # key name -> token: `agent:<id>` bound read keys, `reader` (unbound), `admin` (unbound)
    keys: dict[str, str]


@pytest.fixture(scope="module")
async def vaults(stack: Stack, worker: Worker, updates: TopicReader) -> Vaults:
    """One namespace: two personal memories per agent and two shared ones, all on one
    topic, so that every search finds them all unless visibility keeps them out."""
    namespace = f"ns-auth-{uuid.uuid4().hex[:8]}"
    personal: dict[str, list[str]] = {agent: [] for agent in AGENTS}
    shared: list[str] = []
    async with Publisher(stack.broker.bootstrap, producer="tests") as publisher:
        for agent in AGENTS:
            for n in (1, 2):
                personal[agent].append(await publisher.write_memory(
                    namespace, f"{agent.title()}'s private note {n} about {SECRET_TOPIC}.",
                    scope="personal", agent_id=agent, tier="long_term"))
        for n in (1, 2):
            shared.append(await publisher.write_memory(
                namespace, f"Team note {n}: {SECRET_TOPIC} changes every Monday."))
        # An update of each agent's first memory waits for review (long-term, so protected,
        # unlike working memory): a pending diff per agent.
        for agent in AGENTS:
            await publisher.update_memory(namespace, personal[agent][0], expected_version=1,
                                          text=f"{agent.title()}'s revised note about "
                                               f"{SECRET_TOPIC}.")
    wanted = {(record_id, "created") for ids in personal.values() for record_id in ids} | {
        (record_id, "created") for record_id in shared} | {
        (ids[0], "proposed") for ids in personal.values()}

    def announced(messages: list[Received]) -> set[tuple[str, str]]:
        bodies = [json.loads(message.value) for message in messages]
        return {(body["record_id"], body["change"]) for body in bodies}

    await updates.wait_for(lambda messages: wanted <= announced(messages), timeout_s=60)
    keys = {f"agent:{agent}": stack.make_key("--namespace", namespace, "--perm", "read",
                                             "--agent", agent) for agent in AGENTS}
    keys["reader"] = stack.make_key("--namespace", namespace, "--perm", "read")
    keys["admin"] = stack.make_key("--namespace", namespace, "--perm", "admin")
    return Vaults(namespace, personal, shared, keys)


def client(worker: Worker, token: str | None) -> httpx.AsyncClient:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return httpx.AsyncClient(base_url=worker.base_url, headers=headers, timeout=20)


async def test_every_route_but_health_and_metrics_wants_a_key(worker: Worker) -> None:
    routes = authenticated_routes()
    assert {"/v1/search", "/v1/context", "/v1/records/{record_id}", "/v1/keys"} <= set(routes)
    async with client(worker, None) as anonymous:
        for route in routes:
            statuses = set()
            for method in ("GET", "POST", "DELETE"):
                answer = await anonymous.request(method, concrete(route),
                                                 params={"namespace": "any", "query": "q"})
                statuses.add(answer.status_code)
                if answer.status_code == 401:
                    assert answer.headers["WWW-Authenticate"].startswith("Bearer")
            # A method the route does not serve is 405 whoever asks.
            assert 401 in statuses and statuses <= {401, 405}, (route, statuses)
        for garbage in ("Bearer nope", "Basic dXNlcjpwYXNz",
                        "Bearer msk_0123456789ab_" + "x" * 43):
            answer = await anonymous.get("/v1/search", params={"namespace": "any", "query": "q"},
                                         headers={"Authorization": garbage})
            assert answer.status_code == 401
        assert (await anonymous.get("/healthz")).status_code == 200
        metrics = (await anonymous.get("/metrics")).text
    assert re.search(r'memstream_auth_failures_total\{failure="missing"\} [1-9]', metrics)
    assert re.search(r'memstream_auth_failures_total\{failure="unknown"\} [1-9]', metrics)


async def test_a_key_of_another_namespace_is_forbidden(stack: Stack, worker: Worker) -> None:
    token = stack.make_key("--namespace", "elsewhere", "--perm", "read,write,review")
    asked = {"namespace": "team-a", "query": "q", "agent_id": "ann"}
    async with client(worker, token) as other:
        for route in authenticated_routes():
            # What each route takes: a key's or a dead letter's own route takes no namespace.
            by_id = "{key_id}" in route or "{dead_letter_id}" in route
            answer = await other.get(concrete(route), params={} if by_id
                                     else {"namespace": asked["namespace"]})
            if answer.status_code == 405:
                answer = await other.post(concrete(route), json={
                    **asked, "text": "a note", "expected_version": 1, "reason": "r",
                    "version": 1, "decision": "approve", "type": "run.started",
                    "payload": {"run_id": "r1"}})
            # A key or a dead letter of another namespace is answered as not found: its id
            # says nothing.
            assert answer.status_code in ((403, 404) if by_id else (403,)), \
                (route, answer.text)
        metrics = (await other.get("/metrics")).text
    assert re.search(r'memstream_auth_failures_total\{failure="forbidden"\} [1-9]', metrics)


async def visible_ids(http: httpx.AsyncClient, vaults: Vaults, route: str,
                      requested_agent: str | None, record_id: str) -> set[str] | None:
    """The record ids a read shows, or None when the key may not ask (403)."""
    # The parameters each route takes: a read by id shows what the key may see, whatever
    # agent a request names, and names none.
    params: dict[str, Any] = {"namespace": vaults.namespace}
    if route in ("search", "context", "summary"):
        params |= {"query": SECRET_TOPIC, "min_score": "-1"}
    if route in ("search", "pending", "changes", "graph", "summary"):
        params["limit"] = "50"
    if route == "summary":
        params["budget_tokens"] = "4000"
    if requested_agent is not None and route not in ("record", "history", "diff"):
        params["agent_id"] = requested_agent
    path = {"search": "/v1/search", "context": "/v1/context", "summary": "/v1/summary",
            "record": f"/v1/records/{record_id}",
            "history": f"/v1/records/{record_id}/history",
            "diff": f"/v1/records/{record_id}/diff",
            "pending": "/v1/pending-diffs", "queue": "/v1/review-queue",
            "changes": "/v1/changes", "graph": "/v1/graph"}[route]
    answer = await http.get(path, params=params)
    if answer.status_code == 403:
        return None
    body = answer.json()
    if route in ("record", "history", "diff"):
        assert answer.status_code in (200, 404), answer.text
        return {record_id} if answer.status_code == 200 else set()
    assert answer.status_code == 200, answer.text
    if route == "search":
        return {hit["record_id"] for hit in body["hits"]}
    if route == "context":
        return {item["record_id"] for items in body["sections"].values() for item in items}
    if route == "summary":
        return set(body["memory_ids"]) | set(RECORD_ID.findall(body["summary"]))
    if route == "changes":
        return {change["record_id"] for change in body["changes"]}
    if route == "graph":
        return {node["record_id"] for node in body["nodes"]}
    if route == "queue":
        return {item["record_id"] for item in body["items"]}
    return {diff["record_id"] for diff in body["pending_diffs"]}


@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(["agent:ann", "agent:bob", "agent:cy", "reader", "admin"]),
       route=st.sampled_from(["search", "context", "record", "history", "diff", "pending",
                              "queue", "changes", "graph", "summary"]),
       requested=st.none() | st.sampled_from(AGENTS),
       owner=st.sampled_from(AGENTS), which=st.sampled_from([0, 1]))
async def test_a_key_never_shows_personal_memories_it_may_not_read(
    worker: Worker, vaults: Vaults, key: str, route: str, requested: str | None, owner: str,
    which: int,
) -> None:
    bound = key.removeprefix("agent:") if key.startswith("agent:") else None
    target = vaults.personal[owner][which]

    async with client(worker, vaults.keys[key]) as http:
        shown = await visible_ids(http, vaults, route, requested, target)
    may_read = {bound} if bound is not None else set(AGENTS) if key == "admin" else set()
    if shown is None:
        # Asking for another agent's vault is refused, never answered from it.
        assert requested is not None and requested not in may_read
        return
    others = {record_id for agent, ids in vaults.personal.items() if agent not in may_read
              for record_id in ids}
    assert not shown & others, (key, route, requested, sorted(shown & others))
    if route in ("record", "history", "diff"):
        assert shown == ({target} if owner in may_read else set())
    elif route in ("search", "summary") and bound is not None:
        assert set(vaults.personal[bound]) <= shown, "its own vault is read"


async def test_a_revoked_key_stops_working_at_once(stack: Stack, worker: Worker,
                                                  http: httpx.AsyncClient) -> None:
    token = stack.make_key("--namespace", "team-r", "--perm", "read")
    key_id = token.split("_")[1]
    async with client(worker, token) as holder:
        params = {"namespace": "team-r", "query": "anything"}
        assert (await holder.get("/v1/search", params=params)).status_code == 200
        revoked = await http.delete(f"/v1/keys/{key_id}")
        assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
        answer = await holder.get("/v1/search", params=params)
        assert answer.status_code == 401 and "revoked" in answer.json()["error"]

    # The key command revokes alike.
    second = stack.make_key("--namespace", "team-r", "--perm", "read")
    subprocess.run([sys.executable, "-m", "streams.commands.keys", "revoke", second.split("_")[1]],
                   cwd=REPO_ROOT, env={"MEMSTREAM_PG_DSN": stack.pg_dsn, "PATH": "/usr/bin"},
                   check=True, capture_output=True)
    async with client(worker, second) as holder:
        assert (await holder.get("/v1/search", params=params)).status_code == 401


async def test_keys_over_http_stay_within_the_admins_namespace(
        stack: Stack, worker: Worker, http: httpx.AsyncClient) -> None:
    admin = stack.make_key("--namespace", "team-k", "--perm", "admin")
    async with client(worker, admin) as team_admin:
        made = await team_admin.post("/v1/keys", json={
            "namespace": "team-k", "permissions": ["read"], "agent_id": "finn"})
        assert made.status_code == 201, made.text
        assert made.json()["token"].startswith("msk_") and made.json()["agent_id"] == "finn"
        assert (await team_admin.post("/v1/keys", json={
            "namespace": None, "permissions": ["read"]})).status_code == 403
        assert (await team_admin.post("/v1/keys", json={
            "namespace": "team-z", "permissions": ["read"]})).status_code == 403
        assert (await team_admin.post("/v1/keys", json={
            "namespace": "team-k", "permissions": ["root"]})).status_code == 400
        listed = (await team_admin.get("/v1/keys", params={"namespace": "team-k"})).json()
        assert {key["key_id"] for key in listed["keys"]} >= {made.json()["key_id"]}
        assert all("token" not in key and "token_hash" not in key for key in listed["keys"])
        assert (await team_admin.get("/v1/keys")).status_code == 403
    operator_keys = (await http.get("/v1/keys")).json()["keys"]
    assert {"team-k", None} <= {key["namespace"] for key in operator_keys}


async def test_no_token_is_logged_or_stored_in_clear(stack: Stack, worker: Worker,
                                                     http: httpx.AsyncClient) -> None:
    token = stack.make_key("--namespace", "team-l", "--perm", "read")
    async with client(worker, token) as holder:
        await holder.get("/v1/search", params={"namespace": "team-l", "query": "q"})
        await holder.get("/v1/search", params={"namespace": "other", "query": "q"})
    forged = token[:-4] + "AAAA"
    async with client(worker, forged) as forger:
        assert (await forger.get("/v1/stats", params={"namespace": "team-l"})).status_code == 401
    logs = "".join(Path(w.log_path).read_text(errors="replace") for w in stack.workers
                   if Path(w.log_path).exists())
    secrets = [t.split("_", 2)[2] for t in (token, forged, stack.operator_key)]
    assert not any(secret in logs for secret in secrets)
    connection = await asyncpg.connect(stack.pg_dsn)
    try:
        rows = await connection.fetch("SELECT row_to_json(api_keys)::text AS row FROM api_keys")
    finally:
        await connection.close()
    assert rows and not any(secret in row["row"] for row in rows for secret in secrets)


async def fresh_database(stack: Stack) -> str:
    """The DSN of a new, empty database on the stack's Postgres."""
    database = f"fresh_{uuid.uuid4().hex[:8]}"
    connection = await asyncpg.connect(stack.pg_dsn)
    try:
        await connection.execute(f"CREATE DATABASE {database}")
    finally:
        await connection.close()
    return stack.pg_dsn.replace("/memstream?", f"/{database}?")


async def test_make_run_makes_a_development_key_on_first_start_only(stack: Stack) -> None:
    # `make run`'s worker (--dev-key) prints this key: tests/integration/test_readme_tour.py.
    dsn = await fresh_database(stack)
    await apply_migrations(dsn)
    keys = await PostgresApiKeys.connect(dsn)
    try:
        made = await make_development_key(keys, auth=True)
        assert made is not None
        assert await make_development_key(keys, auth=True) is None, "a second start makes none"
        caller = await Authenticator(keys, enabled=True).caller(f"Bearer {made.token}")
    finally:
        await keys.close()
    assert caller.namespace is None and caller.may("admin", None)

    unused = await fresh_database(stack)
    await apply_migrations(unused)
    keys = await PostgresApiKeys.connect(unused)
    try:
        assert await make_development_key(keys, auth=False) is None, "none with auth off"
        assert not await keys.any_key()
    finally:
        await keys.close()
