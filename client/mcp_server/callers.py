"""Whose key a tool call runs with. Over stdio the server is the one agent that started it:
its key and namespace are the SDK's settings (the environment or the config file). Over
streamable HTTP each request brings its own key (`Authorization: Bearer`) and may name its
namespace (`X-Memstream-Namespace`); the server's own key is never used for a request, so one
agent's request can never borrow another's rights."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Protocol

from client.sdk import AsyncMemoryClient, Config, Unauthorized

NAMESPACE_HEADER = "x-memstream-namespace"
BEARER = "bearer "


class Callers(Protocol):
    def client(self, headers: Mapping[str, str] | None) -> AsyncMemoryClient:
        """A client with the key and namespace of the request with these headers (None: a
        transport without headers, stdio)."""


@dataclass(frozen=True)
class ConfiguredCaller:
    """Every call with the settings the server was started with (stdio)."""

    config: Config

    def client(self, headers: Mapping[str, str] | None) -> AsyncMemoryClient:
        return AsyncMemoryClient(self.config.url, key=self.config.key,
                                 namespace=self.config.namespace, env={})


@dataclass(frozen=True)
class BearerCallers:
    """Each call with the key its request carries; the namespace its request names, else the
    server's default (streamable HTTP)."""

    url: str
    default_namespace: str | None

    def client(self, headers: Mapping[str, str] | None) -> AsyncMemoryClient:
        found = {name.lower(): value for name, value in (headers or {}).items()}
        authorization = found.get("authorization", "")
        key = authorization[len(BEARER):].strip()
        # An empty key would let the SDK look for one in this process's own settings.
        if not authorization.lower().startswith(BEARER) or not key:
            raise Unauthorized("no key: send it as `Authorization: Bearer msk_…`", status=401)
        return AsyncMemoryClient(self.url, key=key,
                                 namespace=found.get(NAMESPACE_HEADER) or self.default_namespace,
                                 env={})


@asynccontextmanager
async def connected(callers: Callers,
                    headers: Mapping[str, str] | None) -> AsyncIterator[AsyncMemoryClient]:
    client = callers.client(headers)
    try:
        yield client
    finally:
        await client.aclose()
