"""The MCP server on the real stack, through the mcp SDK's own client: over stdio
(`memstream-mcp`, started from docs/mcp.md's configuration as written) and over streamable HTTP (the
Procfile's `mcp` process), an agent's key recalls, remembers, reads, updates and edits its
core block, and reads resources, each write answered by what became of it; a key bound to one
agent never sees another agent's personal memory through any tool or resource."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client, MCPError
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from harness.stack import Stack, Worker, free_port
from processors.recall.summary import RECORD_ID
from streams.plumbing.config import REPO_ROOT
from tests.integration.test_auth import AGENTS, SECRET_TOPIC, Vaults, vaults

pytestmark = pytest.mark.integration

__all__ = ["vaults"]  # the fixture, shared with test_auth.py
TOOLS = {"recall", "remember", "context", "get_memories", "list_memories", "update_memory",
         "core_block", "wake", "checkpoint", "sleep", "summarize", "rate_memories",
         "related", "write_outcome"}
WAIT_S = 30.0
GUIDE = REPO_ROOT / "docs" / "mcp.md"


def guide_servers() -> tuple[dict[str, Any], dict[str, Any]]:
    """docs/mcp.md's two `mcpServers` entries: stdio, then streamable HTTP."""
    stdio, http = (json.loads(block)["mcpServers"]["memstream"]
                   for block in re.findall(r"```json\n(.*?)```", GUIDE.read_text(), re.S))
    return stdio, http


def test_the_readmes_mcp_entry_is_the_guides_tested_one() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    (entry,) = (json.loads(block)["mcpServers"]["memstream"]
                for block in re.findall(r"```json\n(.*?)```", readme, re.S))
    assert entry == guide_servers()[1]


def as_written(value: Any, key: str, namespace: str) -> Any:
    """A snippet's value with the test's key and namespace in place of the guide's."""
    text = json.dumps(value).replace("msk_\\u2026", key).replace("msk_…", key)
    return json.loads(text.replace('"team-a"', json.dumps(namespace)))


@pytest.fixture(scope="module")
def mcp_url(worker: Worker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The streamable HTTP server as the Procfile runs it, on a port of its own, calling the
    test's worker."""
    port = free_port()
    environment = {name: value for name, value in os.environ.items()
                   if not name.startswith("MEMSTREAM_")}
    environment.update(PYTHONPATH=str(REPO_ROOT), MEMSTREAM_URL=worker.base_url,
                       MEMSTREAM_MCP_PORT=str(port),
                       HOME=str(tmp_path_factory.mktemp("mcp-home")))
    process = subprocess.Popen([sys.executable, "-m", "memstream_client.mcp_server.http"],
                               cwd=REPO_ROOT, env=environment)
    deadline = time.monotonic() + WAIT_S
    while True:
        assert process.poll() is None, "the MCP server exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline, "the MCP server does not listen"
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    process.wait(timeout=10)


@asynccontextmanager
async def over_http(url: str, headers: dict[str, str]) -> AsyncIterator[Client]:
    async with create_mcp_http_client(headers=headers) as http, \
            Client(streamable_http_client(url, http_client=http)) as client:
        yield client


def stdio_entry(key: str, namespace: str, url: str, venv: Path) -> dict[str, Any]:
    """docs/mcp.md's stdio entry, its placeholders filled and nothing else changed: the key,
    the namespace, the worker's URL and the virtualenv that holds the client."""
    entry = as_written(guide_servers()[0], key, namespace)
    assert entry["command"].startswith("/path/to/venv/"), entry["command"]
    entry["command"] = str(venv) + entry["command"].removeprefix("/path/to/venv")
    assert entry["env"]["MEMSTREAM_URL"] == "http://127.0.0.1:6066", "make run's address"
    entry["env"]["MEMSTREAM_URL"] = url
    return entry


@asynccontextmanager
async def over_stdio(worker: Worker, key: str, namespace: str, home: Path,
                     venv: Path = REPO_ROOT / ".venv") -> AsyncIterator[Client]:
    """The server started as docs/mcp.md's stdio entry says, by its absolute path in `venv`
    (the repository's after `make setup`): no PATH or PYTHONPATH of the test's; HOME is
    `home`, so that no config file of the user's is read."""
    entry = stdio_entry(key, namespace, worker.base_url, venv)
    server = StdioServerParameters(command=entry["command"], args=entry.get("args", []),
                                   env={**entry["env"], "HOME": str(home)})
    async with Client(server) as client:
        yield client


@asynccontextmanager
async def connected(transport: str, worker: Worker, mcp_url: str, key: str, namespace: str,
                    home: Path) -> AsyncIterator[Client]:
    if transport == "stdio":
        async with over_stdio(worker, key, namespace, home) as client:
            yield client
        return
    entry = as_written(guide_servers()[1], key, namespace)
    assert entry["url"] == "http://127.0.0.1:6070/mcp", "make run's address"
    async with over_http(mcp_url, entry["headers"]) as client:
        yield client


async def call(client: Client, tool: str, **arguments: Any) -> Any:
    """A tool's structured answer; a tool error fails the test with its text."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content


async def refusal(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    text: str = result.content[0].text  # type: ignore[union-attr]
    return text


async def eventually(read: Callable[[], Any], done: Callable[[Any], bool]) -> Any:
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while not done(value := await read()):
        assert asyncio.get_running_loop().time() < deadline, f"still {value!r}"
        await asyncio.sleep(0.2)
    return value


def hit_ids(answer: dict[str, Any]) -> list[str]:
    return [hit["record_id"] for hit in answer["hits"]]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_an_agent_recalls_remembers_reads_updates_and_keeps_its_core_block(
    stack: Stack, worker: Worker, mcp_url: str, namespace: str, tmp_path: Path,
    transport: str,
) -> None:
    key = stack.make_key("--namespace", namespace, "--perm", "read,write", "--agent", "finn")
    async with connected(transport, worker, mcp_url, key, namespace, tmp_path) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
        templates = (await client.list_resource_templates()).resource_templates
        assert {t.uri_template for t in templates} == {
            "memstream://blocks/{label}", "memstream://records/{record_id}"}

        assert hit_ids(await call(client, "recall", query="staging deploy VPN")) == []
        written = await call(
            client, "remember", text="Deploys to staging need the VPN; without it the "
            "deploy hangs at the artifact upload.", memory_type="lesson", title="Staging VPN",
            tags=["ops"], scope="personal", links=["Project: Staging"])
        record_id = written["record_id"]
        # Answered once stored: the record it names exists.
        assert (written["outcome"], written["version"]) == ("stored", 1)
        found = await eventually(
            lambda: call(client, "recall", query="do staging deploys need the VPN?"),
            lambda answer: record_id in hit_ids(answer))
        (hit,) = found["hits"]
        assert (hit["title"], hit["memory_type"], hit["tags"], hit["scope"]) == (
            "Staging VPN", "lesson", ["ops"], "personal")

        read = await call(client, "get_memories", record_ids=[record_id, "mem_nothing"])
        (record,) = read["records"]
        assert (record["record_id"], record["agent_id"], record["version"]) == (
            record_id, "finn", 1)
        assert record["text"].endswith("\n\nLinks: [[Project: Staging]]")
        assert read["not_found"] == ["mem_nothing"]

        # A personal memory in the active tier is the agent's working memory: the update
        # applies at once (a protected one would wait as the pending diff `diff_id`).
        changed = await call(client, "update_memory", record_id=record_id, expected_version=1,
                             text="Deploys to staging need the VPN (since the March network "
                                  "change).")
        assert (changed["outcome"], changed["record_id"], changed["version"]) == (
            "updated", record_id, 2)
        updated = await call(client, "get_memories", record_ids=[record_id])
        assert updated["records"][0]["version"] == 2
        assert updated["records"][0]["text"] == (
            "Deploys to staging need the VPN (since the March network change).")

        pack = await call(client, "context", task="deploy the service to staging")
        assert record_id in [item["record_id"] for items in pack["sections"].values()
                             for item in items]

        edit = await call(client, "core_block", label="human",
                          set={"USER": "Alice", "PREFS": ["short answers"]})
        assert (edit["agent_id"], edit["label"], edit["outcome"]) == ("finn", "human",
                                                                      "updated")
        block = await call(client, "core_block", label="human")
        assert block["fields"] == {"USER": "Alice", "PREFS": ["short answers"]}

        shown = await client.read_resource("memstream://blocks/human")
        assert json.loads(shown.contents[0].text)["text"] == (  # type: ignore[union-attr]
            "[USER] Alice\n[PREFS] short answers")
        shown = await client.read_resource(f"memstream://records/{record_id}")
        assert json.loads(shown.contents[0].text)["record"]["record_id"] == (  # type: ignore[union-attr]
            record_id)

        assert await refusal(client, "update_memory", record_id="mem_nothing",
                             expected_version=1, text="x") == (
            "Error executing tool update_memory: 404 no record 'mem_nothing' in "
            f"'{namespace}'; do not retry as is")


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_session_wakes_recalls_remembers_checkpoints_sleeps_and_hands_off(
    stack: Stack, worker: Worker, mcp_url: str, namespace: str, tmp_path: Path,
    transport: str,
) -> None:
    key = stack.make_key("--namespace", namespace, "--perm", "read,write", "--agent", "ivy")
    async with connected(transport, worker, mcp_url, key, namespace, tmp_path) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
        woke = await call(client, "wake", task="fix the flaky login test")
        assert (woke["agent_id"], woke["handoff"]) == ("ivy", None)
        session_id = woke["session_id"]
        assert hit_ids(await call(client, "recall", query="flaky login test")) == []
        remembered = (await call(client, "remember", text="The login test is flaky because "
                                 "it reads the wall clock.", memory_type="lesson"))["record_id"]
        kept = await call(client, "checkpoint", session_id=session_id, memories=[
            {"text": "test_login reads the clock through utils.now().",
             "memory_type": "fact"}])
        (checkpointed,) = kept["record_ids"]
        (write,) = kept["writes"]
        assert (write["outcome"], write["record_id"]) == ("stored", checkpointed)
        slept = await call(client, "sleep", session_id=session_id,
                           summary="Froze the clock in the login test.",
                           next_steps=["Remove the retry decorator"])
        assert (slept["handoff"]["outcome"], slept["handoff"]["record_id"]) == (
            "stored", slept["handoff_record_id"])
        await eventually(
            lambda: call(client, "recall", query="login test clock", min_score=0, limit=10),
            lambda answer: {remembered, checkpointed} <= set(hit_ids(answer)))
        handed = await eventually(lambda: call(client, "wake", task="the login test"),
                                  lambda answer: answer["handoff"] is not None)
        handoff = handed["handoff"]
        assert (handoff["record_id"], handoff["session_id"], handoff["next_steps"]) == (
            slept["handoff_record_id"], session_id, ["Remove the retry decorator"])
        assert "Froze the clock in the login test." in handoff["text"]


async def test_a_request_without_a_key_is_refused_and_the_servers_key_never_lends(
    mcp_url: str,
) -> None:
    async with over_http(mcp_url, {}) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
        assert await refusal(client, "recall", query="anything") == (
            "Error executing tool recall: 401 no key: send it as `Authorization: Bearer "
            "msk_…`; do not retry as is")


async def visible_through(client: Client, tool: str, target: str) -> set[str]:
    """The record ids a tool (or the records resource) shows a key, asked for everything on
    the vaults' topic or for `target` by id."""
    if tool == "recall":
        return set(hit_ids(await call(client, "recall", query=SECRET_TOPIC, limit=50,
                                      min_score=0)))
    if tool == "context":
        pack = await call(client, "context", task=SECRET_TOPIC)
        return {item["record_id"] for items in pack["sections"].values() for item in items}
    if tool == "summarize":
        brief = await call(client, "summarize", query=SECRET_TOPIC, limit=50, min_score=0,
                           budget_tokens=4000)
        return set(brief["memory_ids"]) | set(RECORD_ID.findall(brief["summary"]))
    if tool == "get_memories":
        read = await call(client, "get_memories", record_ids=[target])
        return {record["record_id"] for record in read["records"]}
    if tool == "list_memories":
        listed = await call(client, "list_memories", limit=50)
        return {memory["record_id"] for memory in listed["memories"]}
    if tool == "related":
        return set(hit_ids(await call(client, "recall", query=SECRET_TOPIC, min_score=0,
                                      related_id=target)))
    try:
        shown = await client.read_resource(f"memstream://records/{target}")
    except MCPError as refused:
        assert f"404 no record '{target}'" in str(refused), refused
        return set()
    return {json.loads(shown.contents[0].text)["record"]["record_id"]}  # type: ignore[union-attr]


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(["agent:ann", "agent:bob", "agent:cy", "reader"]),
       tool=st.sampled_from(["recall", "context", "get_memories", "list_memories",
                             "related", "record_resource", "summarize"]),
       owner=st.sampled_from(AGENTS), which=st.sampled_from([0, 1]))
async def test_a_key_never_sees_personal_memories_it_may_not_read_through_any_tool(
    mcp_url: str, vaults: Vaults, key: str, tool: str, owner: str, which: int,
) -> None:
    bound = key.removeprefix("agent:") if key.startswith("agent:") else None
    target = vaults.personal[owner][which]
    headers = {"Authorization": f"Bearer {vaults.keys[key]}",
               "X-Memstream-Namespace": vaults.namespace}
    async with over_http(mcp_url, headers) as client:
        shown = await visible_through(client, tool, target)
    others = {record_id for agent, ids in vaults.personal.items() if agent != bound
              for record_id in ids}
    assert not shown & others, (key, tool, sorted(shown & others))
    if tool in ("get_memories", "record_resource"):
        assert shown == ({target} if owner == bound else set())
    elif tool in ("recall", "summarize") and bound is not None:
        assert set(vaults.personal[bound]) <= shown, "its own vault is read"


async def test_an_agent_may_not_update_another_agents_memory_nor_learn_that_it_exists(
    stack: Stack, mcp_url: str, vaults: Vaults,
) -> None:
    key = stack.make_key("--namespace", vaults.namespace, "--perm", "read,write", "--agent",
                         "ann")
    headers = {"Authorization": f"Bearer {key}", "X-Memstream-Namespace": vaults.namespace}
    bobs = vaults.personal["bob"][1]
    async with over_http(mcp_url, headers) as client:
        hidden = await refusal(client, "update_memory", record_id=bobs, expected_version=1,
                               text="Ann was here.")
        missing = await refusal(client, "update_memory", record_id="mem_nothing",
                                expected_version=1, text="Ann was here.")
        assert hidden == missing.replace("mem_nothing", bobs), "answered as a missing one"
        assert hidden.startswith("Error executing tool update_memory: 404 ")
