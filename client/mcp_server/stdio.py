"""`memstream mcp`: the server over stdio, for a desktop agent that starts it, with the key,
URL and namespace of the SDK's settings (the environment, else the config file). Stdout is
the protocol's: nothing else may be printed there."""

from __future__ import annotations

from client.mcp_server.callers import ConfiguredCaller
from client.mcp_server.server import memory_server
from client.sdk import Config


def serve_stdio(config: Config) -> None:
    memory_server(ConfiguredCaller(config)).run("stdio")
