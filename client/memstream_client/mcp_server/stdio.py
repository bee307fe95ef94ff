"""`memstream mcp` and `memstream-mcp`: the server over stdio, for a desktop agent that starts
it, with the key, URL and namespace of the SDK's settings (the environment, else the config
file). Stdout is the protocol's: nothing else may be printed there."""

from __future__ import annotations

import os
import sys

from memstream_client.mcp_server.callers import ConfiguredCaller
from memstream_client.mcp_server.server import memory_server
from memstream_client.sdk import Config, MemstreamError
from memstream_client.sdk.config import load_config


def serve_stdio(config: Config) -> None:
    memory_server(ConfiguredCaller(config)).run("stdio")


def main() -> int:
    """`memstream-mcp` (the console script): `memstream mcp` without the rest of the CLI."""
    try:
        config = load_config(os.environ)
    except MemstreamError as exc:
        print(f"memstream-mcp: {exc}", file=sys.stderr)
        return 2
    serve_stdio(config)
    return 0
