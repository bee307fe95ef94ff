"""The server over streamable HTTP, a process beside the worker (the Procfile's `mcp`):
`python -m memstream_client.mcp_server.http`, on MEMSTREAM_MCP_HOST:MEMSTREAM_MCP_PORT
(127.0.0.1:6070) at `/mcp`. Each request runs with the key it carries (`callers.py`) against
the worker at MEMSTREAM_URL. Stateless: every request stands alone, so any number of these
processes may serve the same clients."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence

import uvicorn
from starlette.applications import Starlette

from memstream_client.mcp_server.callers import BearerCallers
from memstream_client.mcp_server.server import memory_server
from memstream_client.sdk import load_config

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 6070
PATH = "/mcp"


def http_app(url: str, default_namespace: str | None, host: str) -> Starlette:
    """The ASGI app; `host` is where it listens, which decides the Host headers it accepts
    (the mcp SDK's protection against DNS rebinding)."""
    return memory_server(BearerCallers(url, default_namespace)).streamable_http_app(
        streamable_http_path=PATH, stateless_http=True, json_response=True, host=host)


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] = os.environ) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m memstream_client.mcp_server.http",
        description="memstream's MCP server over streamable HTTP (docs/mcp.md)")
    parser.add_argument("--host", default=env.get("MEMSTREAM_MCP_HOST", DEFAULT_HOST))
    parser.add_argument("--port", type=int,
                        default=int(env.get("MEMSTREAM_MCP_PORT", DEFAULT_PORT)))
    args = parser.parse_args(argv)
    # The key is each request's; the server's own settings give only where the worker is
    # and the namespace of requests that name none.
    config = load_config(env)
    uvicorn.run(http_app(config.url, config.namespace, args.host), host=args.host,
                port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
