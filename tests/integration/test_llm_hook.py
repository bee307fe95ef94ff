"""The optional LLM hook against a local fake of an OpenAI-compatible chat endpoint: its
prose is used when usable, and every failure falls back to the deterministic digest."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aiohttp import web

from harness.stack import free_port
from memstream_client.events import RUN_EVENT_TYPES, Provenance
from processors.knowledge.entities import Mention
from processors.runs.digests import RunDigest, build_digest
from schemas.records import Record
from streams.plumbing.llm_hook import (
    ChatEndpoint,
    LLMHookError,
    digest_prose,
    handoff_prose,
    merge_prose,
)
from streams.plumbing.metrics import Metrics
from streams.plumbing.runtime import Runtime
from streams.stages.knowledge.entity_enrichment import EntityEnricher
from tests.unit.store_fakes import InMemoryStores

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
Reply = Callable[[dict[str, Any]], Awaitable[web.StreamResponse]]


@dataclass
class FakeChat:
    """Answers POST /v1/chat/completions with whatever `reply` makes of the request."""

    reply: Reply
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        return await self.reply(body)


def chat_answer(content: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}


def answering(status: int = 200, **json_or_text: Any) -> Reply:
    async def reply(body: dict[str, Any]) -> web.StreamResponse:
        if "text" in json_or_text:
            return web.Response(text=json_or_text["text"], status=status)
        return web.json_response(json_or_text["json"], status=status)

    return reply


async def too_late(body: dict[str, Any]) -> web.StreamResponse:
    await asyncio.sleep(3)
    return web.json_response(chat_answer("too late"))


@pytest.fixture
async def fake_chat() -> AsyncIterator[tuple[FakeChat, str]]:
    fake = FakeChat(reply=answering(json=chat_answer("ok")))
    app = web.Application()
    app.router.add_post("/v1/chat/completions", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    yield fake, f"http://127.0.0.1:{port}/v1"
    await runner.cleanup()


def digest() -> RunDigest:
    def event(n: int, type_: str, **payload: Any) -> Any:
        return RUN_EVENT_TYPES[type_].model_validate({
            "event_id": f"e{n}", "type": type_, "namespace": "team-a",
            "occurred_at": T0 + timedelta(seconds=n), "producer": "tests",
            "payload": {"run_id": "run-1", **payload},
        })

    return build_digest([
        event(0, "run.started", intent="Fix the flaky login test"),
        event(1, "run.step", kind="decision", text="Mock the clock."),
        event(2, "run.finished", status="succeeded", commits=["abc123"]),
    ])


async def test_usable_prose_from_the_endpoint_is_used(
    fake_chat: tuple[FakeChat, str]
) -> None:
    fake, url = fake_chat
    fake.reply = answering(json=chat_answer("  The login test was fixed.  "))
    metrics = Metrics()
    endpoint = ChatEndpoint(url, "small-model", "sk-test", timeout_s=2)
    try:
        prose = await digest_prose(endpoint, digest(), metrics)
    finally:
        await endpoint.close()
    assert prose == "The login test was fixed."
    (request,) = fake.requests
    assert request["model"] == "small-model"
    assert request["messages"][1]["content"] == digest().summary_text()
    assert fake.headers[0]["Authorization"] == "Bearer sk-test"
    assert metrics.llm_hook.labels("digest", "used")._value.get() == 1


@pytest.mark.parametrize(
    "reply",
    [
        answering(status=503, json={"error": "overloaded"}),
        answering(text="not json"),
        answering(json={"choices": []}),
        answering(json=chat_answer(None)),
        answering(json=chat_answer("   ")),
        answering(json=chat_answer("too long " * 2000)),
        too_late,
    ],
    ids=["error-status", "not-json", "no-choices", "no-content", "empty", "over-cap", "timeout"],
)
async def test_any_failure_of_the_hook_keeps_the_deterministic_digest(
    fake_chat: tuple[FakeChat, str], reply: Reply
) -> None:
    fake, url = fake_chat
    fake.reply = reply
    metrics = Metrics()
    endpoint = ChatEndpoint(url, "small-model", "", timeout_s=0.5)
    try:
        assert await digest_prose(endpoint, digest(), metrics) is None
    finally:
        await endpoint.close()
    assert metrics.llm_hook.labels("digest", "fallback")._value.get() == 1


async def test_an_unreachable_endpoint_is_a_hook_error() -> None:
    endpoint = ChatEndpoint(f"http://127.0.0.1:{free_port()}/v1", "m", "", timeout_s=1)
    try:
        with pytest.raises(LLMHookError):
            await endpoint.complete([{"role": "user", "content": "hi"}])
    finally:
        await endpoint.close()


async def test_without_an_endpoint_the_hook_is_off() -> None:
    metrics = Metrics()
    assert await digest_prose(None, digest(), metrics) is None
    assert metrics.llm_hook.labels("digest", "fallback")._value.get() == 0


async def test_a_merge_is_rewritten_by_the_hook_or_kept_as_merged(
    fake_chat: tuple[FakeChat, str]
) -> None:
    fake, url = fake_chat
    texts = ["Deploys need the VPN.", "A deploy needs the office VPN\nup."]
    metrics = Metrics()
    endpoint = ChatEndpoint(url, "small-model", "", timeout_s=2)
    try:
        fake.reply = answering(json=chat_answer("Deploys need the office VPN up."))
        assert await merge_prose(endpoint, texts, metrics) == "Deploys need the office VPN up."
        fake.reply = answering(status=500, json={"error": "down"})
        assert await merge_prose(endpoint, texts, metrics) is None
    finally:
        await endpoint.close()
    assert fake.requests[0]["messages"][1]["content"] == \
        "1. Deploys need the VPN.\n2. A deploy needs the office VPN up."
    assert metrics.llm_hook.labels("merge", "used")._value.get() == 1
    assert metrics.llm_hook.labels("merge", "fallback")._value.get() == 1
    assert await merge_prose(None, texts, metrics) is None


async def test_a_handoff_is_rewritten_when_the_hook_answers_and_kept_when_it_fails(
    fake_chat: tuple[FakeChat, str]
) -> None:
    fake, url = fake_chat
    handoff = "Summary: Froze the clock.\n\nNext steps:\n- Remove the retry decorator"
    metrics = Metrics()
    endpoint = ChatEndpoint(url, "small-model", "", timeout_s=0.5)
    try:
        fake.reply = answering(json=chat_answer(" Froze the clock; next, drop the retry. "))
        assert await handoff_prose(endpoint, handoff, metrics) == \
            "Froze the clock; next, drop the retry."
        assert fake.requests[0]["messages"][1]["content"] == handoff
        fake.reply = answering(status=503, json={"error": "overloaded"})
        assert await handoff_prose(endpoint, handoff, metrics) is None
    finally:
        await endpoint.close()
    assert metrics.llm_hook.labels("handoff", "used")._value.get() == 1
    assert metrics.llm_hook.labels("handoff", "fallback")._value.get() == 1
    assert await handoff_prose(None, handoff, metrics) is None


async def test_the_hook_adds_the_entities_the_text_writes_and_stops_while_it_is_down(
    fake_chat: tuple[FakeChat, str]
) -> None:
    fake, url = fake_chat
    memory = Record(record_id="mem_1", namespace="team-a", record_kind="memory",
                    text="Ana moved the ledger to Aurora Postgres last week.",
                    provenance=Provenance(source_event_id="e1", source_topic="memory.events",
                                          source_partition=0, source_offset=1,
                                          producer="tests"),
                    created_at=T0)
    store = UnreadEntities([(memory, 3), (memory.model_copy(update={"record_id": "mem_2"}), 1)])
    runtime = Runtime(stores=InMemoryStores(entities=store),  # type: ignore[arg-type]
                      embedder=None, metrics=Metrics(), producer=None,  # type: ignore[arg-type]
                      announcements=None, max_event_bytes=1024)  # type: ignore[arg-type]
    endpoint = ChatEndpoint(url, "small-model", "", timeout_s=2)
    try:
        # A name the text does not write is the model's, not the record's.
        fake.reply = answering(json=chat_answer(
            '```json\n[{"name": "Aurora Postgres", "kind": "database"},'
            ' {"name": "Ana", "kind": "person"}, {"name": "Oracle", "kind": "database"}]\n```'))
        assert await EntityEnricher(runtime, endpoint).read_some() == 2
        assert [(m.key, m.kind, m.source) for m in store.added[("mem_1", 3)]] == [
            ("aurora postgres", "database", "llm"), ("ana", "person", "llm")]
        # An answer of another shape names nothing, and the record is read.
        store.unread = [(memory, 4)]
        fake.reply = answering(json=chat_answer("Aurora Postgres and Ana."))
        assert await EntityEnricher(runtime, endpoint).read_some() == 1
        assert store.added[("mem_1", 4)] == []
        # A hook that is down ends the tick: nothing is marked read.
        store.unread = [(memory, 5)]
        fake.reply = answering(status=503, json={"error": "overloaded"})
        assert await EntityEnricher(runtime, endpoint).read_some() == 0
        assert ("mem_1", 5) not in store.added
    finally:
        await endpoint.close()
    assert fake.requests[0]["messages"][1]["content"] == memory.text


class UnreadEntities:
    """The entity store as the enricher sees it: records not read yet, and what it added."""

    def __init__(self, unread: list[tuple[Record, int]]) -> None:
        self.unread = unread
        self.added: dict[tuple[str, int], list[Mention]] = {}

    async def unread_by_llm(self, limit: int) -> list[tuple[Record, int]]:
        return [item for item in self.unread
                if (item[0].record_id, item[1]) not in self.added][:limit]

    async def add_llm_mentions(self, namespace: str, record_id: str, version: int,
                               mentions: list[Mention]) -> None:
        self.added[(record_id, version)] = list(mentions)
