"""memstream's client distribution (`memstream-client`): the SDK over the HTTP API (`sdk`),
the `memstream` command line (`cli`), the MCP server (`mcp_server`), the pydantic-ai toolset
(`agents`, the `agents` extra), and the wire contract the worker shares with them: the answer
models (`answers`), the event models (`events`), wiki links (`links`), secrets redaction
(`redaction`) and a document version's hash (`documents`). It imports nothing of the worker.
"""
