"""Whose key a tool call runs with. Over stdio the server is the one agent that started it:
its key and namespace are the SDK's settings (the environment or the config file). Over
streamable HTTP each request brings its own key (`Authorization: Bearer`) and may name its
namespace (`X-Memstream-Namespace`); the server's own key is never used for a request, so one
agent's request can never borrow another's rights."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

import httpx

from memstream_client.sdk import AsyncMemoryClient, Config, Unauthorized

NAMESPACE_HEADER = "x-memstream-namespace"
BEARER = "bearer "


# Every call's client is made on the callers' `pool` (their connections to the worker, kept
# for the process's life): a client of its own would cost 40 ms to make (httpx builds an SSL
# context each time) and a new connection, more than the search it sends.
class Callers(Protocol):
    def client(self, headers: Mapping[str, str] | None) -> AsyncMemoryClient:
        """A client with the key and namespace of the request with these headers (None: a
        transport without headers, stdio)."""


@dataclass(frozen=True)
class ConfiguredCaller:
    """Every call with the settings the server was started with (stdio)."""

    config: Config
    pool: httpx.AsyncHTTPTransport = field(default_factory=httpx.AsyncHTTPTransport)

    def client(self, headers: Mapping[str, str] | None) -> AsyncMemoryClient:
        return AsyncMemoryClient(self.config.url, key=self.config.key,
                                 namespace=self.config.namespace, env={}, transport=self.pool)


@dataclass(frozen=True)
class BearerCallers:
    """Each call with the key its request carries; the namespace its request names, else the
    server's default (streamable HTTP)."""

    url: str
    default_namespace: str | None
    pool: httpx.AsyncHTTPTransport = field(default_factory=httpx.AsyncHTTPTransport)

    def client(self, headers: Mapping[str, str] | None) -> AsyncMemoryClient:
        found = {name.lower(): value for name, value in (headers or {}).items()}
        authorization = found.get("authorization", "")
        key = authorization[len(BEARER):].strip()
        # An empty key would let the SDK look for one in this process's own settings.
        if not authorization.lower().startswith(BEARER) or not key:
            raise Unauthorized("no key: send it as `Authorization: Bearer msk_…`", status=401)
        return AsyncMemoryClient(self.url, key=key,
                                 namespace=found.get(NAMESPACE_HEADER) or self.default_namespace,
                                 env={}, transport=self.pool)
