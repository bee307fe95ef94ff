"""The pydantic-ai toolset on the real stack (issue 19, item 3), with a scripted model and a
key bound to one agent: a run checks memory, tries to finish without writing, gets the one
reminder and writes; a second run finds what the first wrote, and its 11th search is refused
by the server (MAX_SEARCHES_PER_RUN, 10 by default). Seed 001's tools keep the agent's active
memory: create, read by id, update (at once: an agent's active personal memory is its working
memory, not protected), each write answered by what became of it. docs/agents.md's example
runs as written."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness.stack import Stack, Worker
from memstream_client.agents.pydantic_ai import MemoryCounters, MemoryRun
from memstream_client.sdk import AsyncMemoryClient, NotFound
from tests.scripted_agent import Script, memory_agent

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]

WAIT_S = 40.0
QUESTION = "how does the billing deploy reach the bastion host?"
LESSON = "The billing deploy reaches the bastion host only through the office VPN."


@pytest.fixture
async def memory(stack: Stack, worker: Worker, namespace: str,
                 tmp_path: Path) -> AsyncIterator[AsyncMemoryClient]:
    key = stack.make_key("--namespace", namespace, "--perm", "read,write",
                         "--agent", "deployer")
    async with AsyncMemoryClient(worker.base_url, key=key, namespace=namespace,
                                 env={"HOME": str(tmp_path)}) as client:
        yield client


async def stored(memory: AsyncMemoryClient, record_id: str, query: str) -> None:
    """Until the worker has stored the record and a search (of no run) finds it."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            await memory.record(record_id)
            if record_id in [hit.record_id for hit in (await memory.search(query)).hits]:
                return
        except NotFound:
            pass
        await asyncio.sleep(0.2)
    raise AssertionError(f"{record_id} not searchable after {WAIT_S} s")


async def test_an_agent_is_reminded_writes_and_a_later_run_finds_it_within_its_budget(
        memory: AsyncMemoryClient) -> None:
    first = MemoryRun(memory, run_id=f"run-{uuid.uuid4().hex[:8]}")
    script = Script([
        [("semantic_memory_search", {"query": QUESTION})],
        "Deployed billing.",
        [("write_memory", {"text": LESSON, "title": "Billing deploy and the VPN"})],
        "Deployed billing; noted how it reaches the bastion host.",
    ])
    result = await memory_agent(script).run("Deploy billing.", deps=first)
    assert result.output == "Deployed billing; noted how it reaches the bastion host."
    assert script.tool_results(1) == [{"hits": []}]
    (reminder,) = script.retries()
    assert "you have not written memory" in reminder
    (written,) = script.tool_results(3)
    # Answered once stored: the record it names exists and is counted as written.
    assert (written["outcome"], written["written"]) == ("stored", True)
    assert (await memory.record(written["record_id"])).record.text == LESSON
    assert first.counters == MemoryCounters(memories_written=1, checked_memories=0,
                                            memory_searches=1)
    await stored(memory, written["record_id"], QUESTION)

    second = MemoryRun(memory, run_id=f"run-{uuid.uuid4().hex[:8]}")
    script = Script([[("semantic_memory_search", {"query": QUESTION})] for _ in range(11)]
                    + ["Deployed billing through the VPN.", "Deployed billing through the VPN."])
    await memory_agent(script).run("Deploy billing again.", deps=second)
    found = [script.tool_results(turn)[0] for turn in range(1, 12)]
    assert all(written["record_id"] in [hit["record_id"] for hit in answer["hits"]]
               for answer in found[:10])
    assert found[0]["hits"][0]["text"] == LESSON
    assert found[10]["budget_exhausted"] and "made its 10 searches" in found[10]["error"]
    assert "hits" not in found[10]
    assert second.counters.memory_searches == 11 and second.counters.checked_memories >= 10
    # It checked but did not write: reminded once, then its output accepted.
    assert len(script.retries()) == 1 and second.reminded


async def test_seed_001_tools_keep_the_agents_active_memory(memory: AsyncMemoryClient) -> None:
    # Wrote without checking: reminded once, then accepted.
    script = Script([
        [("create_active_memory", {"title": "Billing deploy",
                                   "content": "Step 1 of 3: VPN profile requested."})],
        "Requested the VPN profile.", "Requested the VPN profile."])
    await memory_agent(script).run("Start the billing deploy.", deps=MemoryRun(memory))
    assert "you have not checked memory" in script.retries()[0]
    (created,) = script.tool_results(1)
    assert (created["outcome"], created["created"]) == ("stored", True)
    await stored(memory, created["memory_id"], "billing deploy VPN profile")

    script = Script([
        [("get_detailed_active_memories", {"active_memory_ids": [created["memory_id"]]})],
        [("update_active_memory", {"memory_id": created["memory_id"],
                                   "content": "Step 2 of 3: VPN profile installed."})],
        "Installed the VPN profile."])
    run = MemoryRun(memory)
    await memory_agent(script).run("Go on with the billing deploy.", deps=run)
    (read,) = script.tool_results(1)
    (detailed,) = read["memories"]
    assert (detailed["content"], detailed["tier"], detailed["version"]) == (
        "Step 1 of 3: VPN profile requested.", "active", 1)
    (updated,) = script.tool_results(2)
    # The agent's active personal memory is its working memory: the update applies at once,
    # with no review (an approved memory of another tier or scope would wait for one).
    assert updated == {"memory_id": created["memory_id"], "outcome": "updated",
                       "applied": True, "based_on_version": 1, "version": 2}
    assert script.retries() == [] and run.counters == MemoryCounters(
        memories_written=1, checked_memories=1)
    record_id = created["memory_id"]
    now = await memory.record(record_id)
    assert now.version == 2 and now.record.text == "Step 2 of 3: VPN profile installed."
    assert not (await memory.pending_diffs(record_id=record_id)).pending_diffs
    assert (now.record.scope, now.record.agent_id) == ("personal", "deployer")


def test_the_guides_example_runs_as_written(stack: Stack, worker: Worker, namespace: str,
                                            tmp_path: Path) -> None:
    """docs/agents.md's Python, in the guide's namespace made this test's, configured by
    the environment alone, prints what the guide says it prints."""
    # The guide's pydantic-ai part: its LangGraph section is test_langgraph_store.py's.
    guide = (REPO_ROOT / "docs" / "agents.md").read_text().split("\n## LangGraph", 1)[0]
    (example,) = re.findall(r"```python\n(.*?)```", guide, re.S)
    (printed,) = re.findall(r"It prints .*?:\n\n```\n(.*?)```", guide, re.S)
    environment = {name: value for name, value in os.environ.items()
                   if not name.startswith("MEMSTREAM_")}
    environment.update(HOME=str(tmp_path), MEMSTREAM_URL=worker.base_url,
                       MEMSTREAM_API_KEY=stack.operator_key)
    done = subprocess.run([sys.executable, "-c", example.replace('"team-a"', f'"{namespace}"')],
                          cwd=tmp_path, env=environment, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == printed
