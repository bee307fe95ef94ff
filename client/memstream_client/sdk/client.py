"""`MemoryClient` and `AsyncMemoryClient`: every route of the HTTP API as a method, over
httpx. A method is its route's function in memstream_client/sdk/routes.py without the settings: the
call is built there once, and each client only sends it, so the two cannot drift apart.

A failed call is sent again as it was built (`Retries`): a write with the same event id.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import (
    Any,
    Concatenate,
    Generic,
    ParamSpec,
    Self,
    TypeVar,
    get_args,
    get_type_hints,
    overload,
)

import httpx

from memstream_client.sdk import routes
from memstream_client.sdk._base import Call, Retries, answer_of, unreachable
from memstream_client.sdk.config import Config, load_config
from memstream_client.sdk.errors import MemstreamError

P = ParamSpec("P")
T = TypeVar("T")
Build = Callable[Concatenate[Config, P], Call[T]]
# As long as a write may wait for the broker (10 s) and more.
TIMEOUT_S = 30.0
Answered = tuple[int, bytes, str]
RETRIES = Retries()


class Route(Generic[P, T]):
    """A method of `MemoryClient`: its route's call, sent, its answer read."""

    def __init__(self, build: Build[P, T]) -> None:
        self._build = build
        self._signature = signature_of(build)

    @overload
    def __get__(self, client: None, owner: type[Any]) -> Self: ...

    @overload
    def __get__(self, client: MemoryClient, owner: type[Any]) -> Callable[P, T]: ...

    def __get__(self, client: MemoryClient | None, owner: type[Any]) -> Self | Callable[P, T]:
        if client is None:
            return self
        build = self._build

        def method(*args: P.args, **kwargs: P.kwargs) -> T:
            return client._send(build(client.config, *args, **kwargs))

        return described(method, build, self._signature)


class AsyncRoute(Generic[P, T]):
    """A method of `AsyncMemoryClient`: its route's call, sent, its answer read."""

    def __init__(self, build: Build[P, T]) -> None:
        self._build = build
        self._signature = signature_of(build)

    @overload
    def __get__(self, client: None, owner: type[Any]) -> Self: ...

    @overload
    def __get__(self, client: AsyncMemoryClient,
                owner: type[Any]) -> Callable[P, Awaitable[T]]: ...

    def __get__(self, client: AsyncMemoryClient | None,
                owner: type[Any]) -> Self | Callable[P, Awaitable[T]]:
        if client is None:
            return self
        build = self._build

        async def method(*args: P.args, **kwargs: P.kwargs) -> T:
            return await client._send(build(client.config, *args, **kwargs))

        return described(method, build, self._signature)


M = TypeVar("M", bound=Callable[..., Any])


def signature_of(build: Callable[..., Any]) -> inspect.Signature:
    """A route function's signature less the settings, answering what its call is read
    into: its method's."""
    signature = inspect.signature(build)
    (answer,) = get_args(get_type_hints(build)["return"])
    return signature.replace(parameters=list(signature.parameters.values())[1:],
                             return_annotation=answer)


def described(method: M, build: Callable[..., Any], signature: inspect.Signature) -> M:
    """`method` named, documented and signed as its route's function (less the settings),
    for help() and editors."""
    method.__name__ = method.__qualname__ = build.__name__
    method.__doc__ = build.__doc__
    method.__signature__ = signature  # type: ignore[attr-defined]
    return method


def headers_of(config: Config) -> dict[str, str]:
    return {"Authorization": f"Bearer {config.key}"} if config.key else {}


class _Settings:
    """What both clients are made with: the URL, key and default namespace given, else from
    the environment (`env`, by default os.environ) or the config file (`config.py`);
    the timeout of one request; how failed calls are sent again."""

    def __init__(self, url: str | None, key: str | None, namespace: str | None,
                 env: Mapping[str, str] | None, retries: Retries) -> None:
        self.config = load_config(os.environ if env is None else env, url=url, key=key,
                                  namespace=namespace)
        self.retries = retries


class MemoryClient(_Settings):
    """The HTTP API from Python, one call at a time:

        with MemoryClient(namespace="team-a") as memory:
            memory.write_memory("Deploys to staging need the VPN.", tags=["ops"])
            hits = memory.search("do staging deploys need the VPN?").hits
    """

    def __init__(self, url: str | None = None, *, key: str | None = None,
                 namespace: str | None = None, env: Mapping[str, str] | None = None,
                 timeout_s: float = TIMEOUT_S, retries: Retries = RETRIES,
                 transport: httpx.BaseTransport | None = None) -> None:
        super().__init__(url, key, namespace, env, retries)
        self._http = httpx.Client(base_url=self.config.url, timeout=timeout_s,
                                  headers=headers_of(self.config), transport=transport)

    def _send(self, call: Call[T]) -> T:
        """Send `call` until it is answered or its failure is not to be retried."""
        retried = 0
        while True:
            try:
                return answer_of(call, *self._exchange(call))
            except MemstreamError as failure:
                delay = self.retries.delay(call, failure, retried)
                if delay is None:
                    raise
                time.sleep(delay)
            retried += 1

    def _exchange(self, call: Call[Any]) -> Answered:
        try:
            answer = self._http.request(call.method, call.path, params=call.query,
                                        json=call.body)
        except httpx.TransportError as exc:
            raise unreachable(self.config.url, exc) from exc
        return answer.status_code, answer.content, answer.reason_phrase

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    search = Route(routes.search)
    context = Route(routes.context)
    summary = Route(routes.summary)
    fix_patterns = Route(routes.fix_patterns)
    record = Route(routes.record)
    records = Route(routes.records)
    list_records = Route(routes.list_records)
    record_history = Route(routes.record_history)
    record_diff = Route(routes.record_diff)
    block = Route(routes.block)
    pending_diffs = Route(routes.pending_diffs)
    review_queue = Route(routes.review_queue)
    stats = Route(routes.stats)
    changes = Route(routes.changes)
    graph = Route(routes.graph)
    neighbours = Route(routes.neighbours)
    entities = Route(routes.entities)
    entity = Route(routes.entity)
    consolidation_counts = Route(routes.consolidation_counts)
    consolidation_reports = Route(routes.consolidation_reports)
    runs = Route(routes.runs)
    run = Route(routes.run)
    dead_letters = Route(routes.dead_letters)
    dead_letter = Route(routes.dead_letter)
    keys = Route(routes.keys)
    key = Route(routes.key)
    health = Route(routes.health)
    openapi = Route(routes.openapi)
    create_key = Route(routes.create_key)
    revoke_key = Route(routes.revoke_key)
    write_memory = Route(routes.write_memory)
    write_outcome = Route(routes.write_outcome)
    update_memory = Route(routes.update_memory)
    deprecate_memory = Route(routes.deprecate_memory)
    restore_memory = Route(routes.restore_memory)
    review = Route(routes.review)
    edit_block = Route(routes.edit_block)
    run_event = Route(routes.run_event)
    wake = Route(routes.wake)
    checkpoint = Route(routes.checkpoint)
    sleep = Route(routes.sleep)
    session = Route(routes.session)
    upsert_document = Route(routes.upsert_document)
    delete_document = Route(routes.delete_document)
    documents = Route(routes.documents)
    document = Route(routes.document)
    rate_memories = Route(routes.rate_memories)
    memory_scores = Route(routes.memory_scores)
    scoring_config = Route(routes.scoring_config)
    scoring_config_history = Route(routes.scoring_config_history)
    set_scoring_config = Route(routes.set_scoring_config)
    gaps = Route(routes.gaps)
    planning_items = Route(routes.planning_items)
    planning_item = Route(routes.planning_item)
    plan_sync = Route(routes.plan_sync)


class AsyncMemoryClient(_Settings):
    """The HTTP API from asyncio; each method as `MemoryClient`'s, awaited:

        async with AsyncMemoryClient(namespace="team-a") as memory:
            hits = (await memory.search("do staging deploys need the VPN?")).hits
    """

    def __init__(self, url: str | None = None, *, key: str | None = None,
                 namespace: str | None = None, env: Mapping[str, str] | None = None,
                 timeout_s: float = TIMEOUT_S, retries: Retries = RETRIES,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        super().__init__(url, key, namespace, env, retries)
        self._http = httpx.AsyncClient(base_url=self.config.url, timeout=timeout_s,
                                       headers=headers_of(self.config), transport=transport)

    async def _send(self, call: Call[T]) -> T:
        """Send `call` until it is answered or its failure is not to be retried."""
        retried = 0
        while True:
            try:
                return answer_of(call, *await self._exchange(call))
            except MemstreamError as failure:
                delay = self.retries.delay(call, failure, retried)
                if delay is None:
                    raise
                await asyncio.sleep(delay)
            retried += 1

    async def _exchange(self, call: Call[Any]) -> Answered:
        try:
            answer = await self._http.request(call.method, call.path, params=call.query,
                                              json=call.body)
        except httpx.TransportError as exc:
            raise unreachable(self.config.url, exc) from exc
        return answer.status_code, answer.content, answer.reason_phrase

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, traceback: TracebackType | None) -> None:
        await self.aclose()

    search = AsyncRoute(routes.search)
    context = AsyncRoute(routes.context)
    summary = AsyncRoute(routes.summary)
    fix_patterns = AsyncRoute(routes.fix_patterns)
    record = AsyncRoute(routes.record)
    records = AsyncRoute(routes.records)
    list_records = AsyncRoute(routes.list_records)
    record_history = AsyncRoute(routes.record_history)
    record_diff = AsyncRoute(routes.record_diff)
    block = AsyncRoute(routes.block)
    pending_diffs = AsyncRoute(routes.pending_diffs)
    review_queue = AsyncRoute(routes.review_queue)
    stats = AsyncRoute(routes.stats)
    changes = AsyncRoute(routes.changes)
    graph = AsyncRoute(routes.graph)
    neighbours = AsyncRoute(routes.neighbours)
    entities = AsyncRoute(routes.entities)
    entity = AsyncRoute(routes.entity)
    consolidation_counts = AsyncRoute(routes.consolidation_counts)
    consolidation_reports = AsyncRoute(routes.consolidation_reports)
    runs = AsyncRoute(routes.runs)
    run = AsyncRoute(routes.run)
    dead_letters = AsyncRoute(routes.dead_letters)
    dead_letter = AsyncRoute(routes.dead_letter)
    keys = AsyncRoute(routes.keys)
    key = AsyncRoute(routes.key)
    health = AsyncRoute(routes.health)
    openapi = AsyncRoute(routes.openapi)
    create_key = AsyncRoute(routes.create_key)
    revoke_key = AsyncRoute(routes.revoke_key)
    write_memory = AsyncRoute(routes.write_memory)
    write_outcome = AsyncRoute(routes.write_outcome)
    update_memory = AsyncRoute(routes.update_memory)
    deprecate_memory = AsyncRoute(routes.deprecate_memory)
    restore_memory = AsyncRoute(routes.restore_memory)
    review = AsyncRoute(routes.review)
    edit_block = AsyncRoute(routes.edit_block)
    run_event = AsyncRoute(routes.run_event)
    wake = AsyncRoute(routes.wake)
    checkpoint = AsyncRoute(routes.checkpoint)
    sleep = AsyncRoute(routes.sleep)
    session = AsyncRoute(routes.session)
    upsert_document = AsyncRoute(routes.upsert_document)
    delete_document = AsyncRoute(routes.delete_document)
    documents = AsyncRoute(routes.documents)
    document = AsyncRoute(routes.document)
    rate_memories = AsyncRoute(routes.rate_memories)
    memory_scores = AsyncRoute(routes.memory_scores)
    scoring_config = AsyncRoute(routes.scoring_config)
    scoring_config_history = AsyncRoute(routes.scoring_config_history)
    set_scoring_config = AsyncRoute(routes.set_scoring_config)
    gaps = AsyncRoute(routes.gaps)
    planning_items = AsyncRoute(routes.planning_items)
    planning_item = AsyncRoute(routes.planning_item)
    plan_sync = AsyncRoute(routes.plan_sync)
