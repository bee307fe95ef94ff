"""The visibility property over MCP: a key bound to one agent never sees another agent's
personal memory through any tool or resource of the MCP server (issue 19), on the real stack
over streamable HTTP.

Two agents of one namespace each hold personal memories, a core block, and a slept session
(checkpointed memories, a handoff), every text of theirs carrying the agent's own marker word;
shared memories carry none. For a key bound to either agent, every tool and resource is called
in an order Hypothesis draws, aimed at the other agent's record ids, block labels and session;
no answer's text may hold the other's marker, and the agent's own memories must be found (so
that the test can fail). The server's tool list must be exactly the probed one: a tool added
later fails the test until it is probed here."""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client, MCPError

from harness.kafka_io import TopicReader, wait_caught_up
from harness.stack import Stack, Worker
from memstream_client.sdk import AsyncMemoryClient
from publisher.kafka_publisher import Publisher
from tests.integration.conftest import updated_ids
from tests.integration.test_auth import SECRET_TOPIC
from tests.integration.test_mcp import mcp_url, over_http

pytestmark = pytest.mark.integration

__all__ = ["mcp_url"]  # the fixture, shared with test_mcp.py
# Words no other text of the test holds: whoever reads one read that agent's memory.
MARKERS = {"ann": "zinnia", "bob": "quokka"}
# Each agent's block labels: `persona` is Bob's alone, so Ann asking for it meets a block
# that exists, but not for her.
LABELS = {"ann": ("human",), "bob": ("human", "persona")}
WAIT_S = 60.0


@dataclass(frozen=True)
class Agent:
    key: str
    # Record ids of its personal memories: written, checkpointed, and its handoff.
    personal: list[str]
    session_id: str
    # The event ids of the writes that made them, in the same order.
    events: list[str]


@dataclass(frozen=True)
class World:
    namespace: str
    agents: dict[str, Agent]
    shared: list[str]


@pytest.fixture(scope="module")
async def world(stack: Stack, worker: Worker, updates: TopicReader,
                tmp_path_factory: pytest.TempPathFactory) -> World:
    namespace = f"ns-mcpvis-{uuid.uuid4().hex[:8]}"
    written: dict[str, list[str]] = {agent: [] for agent in MARKERS}
    events: dict[str, list[str]] = {agent: [] for agent in MARKERS}
    async with Publisher(stack.broker.bootstrap, producer="tests") as publisher:
        for agent, marker in MARKERS.items():
            for n in (1, 2):
                events[agent].append(uuid.uuid4().hex)
                written[agent].append(await publisher.write_memory(
                    namespace, f"{agent.title()}'s private note {n} about {SECRET_TOPIC}: "
                    f"the {marker} rota starts at nine.", scope="personal", agent_id=agent,
                    event_id=events[agent][-1]))
            for label in LABELS[agent]:
                await publisher.edit_block(namespace, agent, label, set={
                    "NOTE": f"{marker} keeps the {label} notes"})
        shared = [await publisher.write_memory(
            namespace, f"Team note {n}: {SECRET_TOPIC} changes every Monday.")
            for n in (1, 2)]
    home = {"HOME": str(tmp_path_factory.mktemp("mcpvis-home"))}
    agents = {}
    for agent, marker in MARKERS.items():
        key = stack.make_key("--namespace", namespace, "--perm", "read,write", "--agent", agent)
        async with AsyncMemoryClient(worker.base_url, key=key, namespace=namespace,
                                     env=home) as sdk:
            woke = await sdk.wake(f"{SECRET_TOPIC}, {marker} edition")
            kept = await sdk.checkpoint(woke.session_id, [
                {"text": f"The {marker} checkpoint: {SECRET_TOPIC} moved to Tuesdays."}])
            slept = await sdk.sleep(woke.session_id, f"Settled the {marker} rota.",
                                    next_steps=[f"Tell the {marker} team"])
        assert slept.handoff_record_id is not None
        agents[agent] = Agent(key, [*written[agent], *kept.record_ids,
                                    slept.handoff_record_id], woke.session_id,
                              [*events[agent], *(w.event_id for w in kept.writes),
                               *(w.event_id for w in slept.writes)])
    wanted = {record_id for agent in agents.values() for record_id in agent.personal}
    wanted |= set(shared)
    await updates.wait_for(lambda messages: wanted <= set(updated_ids(messages, namespace)),
                           timeout_s=WAIT_S)
    await wait_caught_up(stack.broker.bootstrap, worker.app_id, ["memory.events"])
    return World(namespace, agents, shared)


def answer_text(result: Any) -> str:
    """Everything a tool's answer shows the model: its content and its structured content."""
    shown = [getattr(part, "text", "") for part in result.content]
    return "\n".join([*shown, json.dumps(result.structured_content)])


async def answered(client: Client, tool: str, **arguments: Any) -> tuple[dict[str, Any], str]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content, answer_text(result)


async def refused(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return answer_text(result)


async def resource(client: Client, uri: str) -> tuple[dict[str, Any] | None, str]:
    """A resource's JSON and text, or None and the refusal's text."""
    try:
        shown = await client.read_resource(uri)
    except MCPError as refusal:
        return None, str(refusal)
    text: str = shown.contents[0].text  # type: ignore[union-attr]
    return json.loads(text), text


@dataclass(frozen=True)
class Probe:
    """One agent's call, aimed at the other: `me` and `other` name the agents, `which`
    picks which of the other's things is asked for."""

    client: Client
    world: World
    me: str
    other: str
    which: int

    @property
    def namespace(self) -> str:
        return self.world.namespace

    @property
    def mine(self) -> Agent:
        return self.world.agents[self.me]

    @property
    def theirs(self) -> Agent:
        return self.world.agents[self.other]

    @property
    def their_record(self) -> str:
        return self.theirs.personal[self.which % len(self.theirs.personal)]

    @property
    def their_label(self) -> str:
        return LABELS[self.other][self.which % len(LABELS[self.other])]


async def probe_recall(probe: Probe) -> list[str]:
    found, text = await answered(probe.client, "recall", query=SECRET_TOPIC, limit=50,
                                 min_score=0)
    hits = {hit["record_id"] for hit in found["hits"]}
    assert set(probe.mine.personal[:2]) <= hits, "its own memories are found"
    assert not hits & set(probe.theirs.personal)
    _, related = await answered(probe.client, "recall", query=SECRET_TOPIC, min_score=0,
                                related_id=probe.their_record)
    return [text, related]


async def probe_remember(probe: Probe) -> list[str]:
    _, text = await answered(
        probe.client, "remember", text=f"{probe.me.title()} noted the {MARKERS[probe.me]} "
        f"rota again for {SECRET_TOPIC}.", scope="personal", related_ids=[probe.their_record])
    return [text]


async def probe_context(probe: Probe) -> list[str]:
    pack, text = await answered(probe.client, "context", task=SECRET_TOPIC)
    assert pack["core"]["agent_id"] == probe.me
    assert MARKERS[probe.me] in str(pack["core"]["blocks"]), "its own core blocks come first"
    return [text]


async def probe_get_memories(probe: Probe) -> list[str]:
    asked = [*probe.theirs.personal, probe.mine.personal[0]]
    read, text = await answered(probe.client, "get_memories", record_ids=asked)
    assert [record["record_id"] for record in read["records"]] == [probe.mine.personal[0]]
    assert read["not_found"] == probe.theirs.personal
    return [text]


async def probe_list_memories(probe: Probe) -> list[str]:
    texts = []
    for personal in (False, True):
        listed, text = await answered(probe.client, "list_memories", personal=personal,
                                      limit=50)
        shown = {memory["record_id"] for memory in listed["memories"]}
        assert set(probe.mine.personal) <= shown, "its own memories are listed"
        assert not shown & set(probe.theirs.personal)
        texts.append(text)
    return texts


async def probe_summarize(probe: Probe) -> list[str]:
    brief, text = await answered(probe.client, "summarize", query=SECRET_TOPIC, limit=50,
                                 min_score=0, budget_tokens=4000)
    assert set(probe.mine.personal[:2]) <= set(brief["memory_ids"]), "its own are summarized"
    assert not set(brief["memory_ids"]) & set(probe.theirs.personal)
    return [text]


async def probe_update_memory(probe: Probe) -> list[str]:
    hidden = await refused(probe.client, "update_memory", record_id=probe.their_record,
                           expected_version=1, text=f"{probe.me} was here.")
    missing = await refused(probe.client, "update_memory", record_id="mem_nothing",
                            expected_version=1, text=f"{probe.me} was here.")
    assert hidden == missing.replace("mem_nothing", probe.their_record), \
        "answered as a missing record"
    return [hidden]


async def block_seen(probe: Probe, read: Callable[[str], Awaitable[tuple[bool, str]]]
                     ) -> list[str]:
    """A block label of the other agent, as `read` shows it to this agent: its own block of
    that label, or the answer a label nobody has gets."""
    label = probe.their_label
    found, text = await read(label)
    if label in LABELS[probe.me]:
        assert found and MARKERS[probe.me] in text, text
    else:
        nobody_found, nobody = await read("nothing")
        assert not found and not nobody_found
        assert text == nobody.replace("nothing", label), "answered as a missing block"
    return [text]


async def probe_core_block(probe: Probe) -> list[str]:
    async def read(label: str) -> tuple[bool, str]:
        result = await probe.client.call_tool("core_block", {"label": label})
        return not result.is_error, answer_text(result)

    return await block_seen(probe, read)


async def probe_block_resource(probe: Probe) -> list[str]:
    async def read(label: str) -> tuple[bool, str]:
        shown, text = await resource(probe.client, f"memstream://blocks/{label}")
        return shown is not None, text

    return await block_seen(probe, read)


async def probe_record_resource(probe: Probe) -> list[str]:
    hidden, text = await resource(probe.client, f"memstream://records/{probe.their_record}")
    assert hidden is None and f"404 no record '{probe.their_record}'" in text, text
    own, own_text = await resource(probe.client,
                                   f"memstream://records/{probe.mine.personal[0]}")
    assert own is not None and MARKERS[probe.me] in own_text
    return [text, own_text]


async def probe_wake(probe: Probe) -> list[str]:
    woke, text = await answered(probe.client, "wake", task=SECRET_TOPIC)
    assert woke["agent_id"] == probe.me
    # Its own last handoff (none while the one a probe's sleep wrote is on its way).
    assert woke["handoff"] is None or MARKERS[probe.me] in woke["handoff"]["text"]
    assert MARKERS[probe.me] in str(woke["context"]["core"]["blocks"])
    return [text]


async def probe_checkpoint(probe: Probe) -> list[str]:
    hidden = await refused(probe.client, "checkpoint", session_id=probe.theirs.session_id,
                           memories=[{"text": f"{probe.me} was in their session."}])
    assert f"404 no session '{probe.theirs.session_id}'" in hidden, hidden
    woke, _ = await answered(probe.client, "wake", task="a short one")
    _, kept = await answered(probe.client, "checkpoint", session_id=woke["session_id"],
                             memories=[{"text": f"The {MARKERS[probe.me]} rota of "
                                        f"{SECRET_TOPIC} holds."}])
    return [hidden, kept]


async def probe_sleep(probe: Probe) -> list[str]:
    hidden = await refused(probe.client, "sleep", session_id=probe.theirs.session_id,
                           summary=f"{probe.me} ended their session.")
    assert f"404 no session '{probe.theirs.session_id}'" in hidden, hidden
    woke, _ = await answered(probe.client, "wake", task="a short one")
    _, slept = await answered(probe.client, "sleep", session_id=woke["session_id"],
                              summary=f"Kept the {MARKERS[probe.me]} rota.")
    return [hidden, slept]


async def probe_rate_memories(probe: Probe) -> list[str]:
    hidden = await refused(probe.client, "rate_memories", ratings=[
        {"memory_id": probe.their_record, "useful": False}])
    missing = await refused(probe.client, "rate_memories", ratings=[
        {"memory_id": "mem_nothing", "useful": False}])
    assert "404 " in hidden and "broken_reference" in hidden, hidden
    assert hidden == missing.replace("mem_nothing", probe.their_record), \
        "answered as a missing memory"
    # With one of the other's among its own, nothing is rated.
    mixed = await refused(probe.client, "rate_memories", ratings=[
        {"memory_id": probe.mine.personal[0], "useful": True},
        {"memory_id": probe.their_record, "useful": False}])
    rated, text = await answered(probe.client, "rate_memories", ratings=[
        {"memory_id": probe.mine.personal[0], "useful": True},
        {"memory_id": probe.world.shared[0], "useful": False}],
        gap=f"when the {MARKERS[probe.me]} rota changes", gap_query=SECRET_TOPIC)
    assert rated["rated"] == 2
    return [hidden, mixed, text]


async def probe_related(probe: Probe) -> list[str]:
    hidden = await refused(probe.client, "related", start=probe.their_record)
    missing = await refused(probe.client, "related", start="mem_nothing")
    assert hidden == missing.replace("mem_nothing", probe.their_record), \
        "answered as a missing record"
    around, text = await answered(probe.client, "related", start=probe.mine.personal[0],
                                  depth=3)
    assert around["nodes"][0]["id"] == probe.mine.personal[0], "the walk starts at its own"
    # The other agent's name is an entity its memories mention: none of them is reached.
    _, other = await refused_or_answered(probe.client, "related",
                                         start=f"entity:{probe.other}", depth=2)
    return [hidden, text, other]


async def probe_write_outcome(probe: Probe) -> list[str]:
    theirs = probe.theirs.events[probe.which % len(probe.theirs.events)]
    hidden = await refused(probe.client, "write_outcome", event_id=theirs, wait_s=0)
    # What became of another agent's personal write is its own business: not found. (A write
    # nobody sent answers `pending`, so the two differ; event ids are not guessed, unless
    # their writer chose them.)
    assert f"404 no write '{theirs}'" in hidden, hidden
    mine = probe.mine.events[probe.which % len(probe.mine.events)]
    own, text = await answered(probe.client, "write_outcome", event_id=mine, wait_s=0)
    assert (own["outcome"], own["record_id"]) == (
        "stored", probe.mine.personal[probe.which % len(probe.mine.personal)])
    return [hidden, text]


async def refused_or_answered(client: Client, tool: str, **arguments: Any
                              ) -> tuple[bool, str]:
    result = await client.call_tool(tool, arguments)
    return not result.is_error, answer_text(result)


# Every tool, and every resource by its template: each probe returns the texts its calls
# answered.
PROBES: dict[str, Callable[[Probe], Awaitable[list[str]]]] = {
    "recall": probe_recall, "remember": probe_remember, "context": probe_context,
    "get_memories": probe_get_memories, "list_memories": probe_list_memories,
    "update_memory": probe_update_memory, "summarize": probe_summarize,
    "core_block": probe_core_block, "wake": probe_wake, "checkpoint": probe_checkpoint,
    "sleep": probe_sleep, "rate_memories": probe_rate_memories, "related": probe_related,
    "write_outcome": probe_write_outcome,
    "memstream://blocks/{label}": probe_block_resource,
    "memstream://records/{record_id}": probe_record_resource,
}


@settings(max_examples=8, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(me=st.sampled_from(sorted(MARKERS)), which=st.sampled_from([0, 1, 2, 3]),
       order=st.permutations(sorted(PROBES)))
async def test_a_key_bound_to_an_agent_never_sees_another_agents_memory_through_mcp(
    mcp_url: str, world: World, me: str, which: int, order: list[str],
) -> None:
    other = next(agent for agent in MARKERS if agent != me)
    headers = {"Authorization": f"Bearer {world.agents[me].key}",
               "X-Memstream-Namespace": world.namespace}
    async with over_http(mcp_url, headers) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        templates = {template.uri_template for template in
                     (await client.list_resource_templates()).resource_templates}
        assert tools | templates == set(PROBES), "a tool or resource no probe covers"
        probe = Probe(client, world, me, other, which)
        for name in order:
            for text in await PROBES[name](probe):
                assert MARKERS[other] not in text, (me, name, text)
