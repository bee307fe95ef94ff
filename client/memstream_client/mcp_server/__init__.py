"""memstream as an MCP server: the tools an agent calls (recall, remember, context,
get_memories, update_memory, core_block; a session's wake, checkpoint and sleep) and its core
blocks and records as resources, each a call of the SDK (`sdk`) against the HTTP API with
the caller's key, so that every rule of a key holds as it does over HTTP. `memstream mcp`
serves it over stdio (`stdio.py`); `python -m memstream_client.mcp_server.http` over
streamable HTTP, beside the worker (docs/mcp.md)."""
