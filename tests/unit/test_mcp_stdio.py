"""`memstream-mcp` (memstream_client/mcp_server/stdio.py), the console script an MCP client
starts: a setting it cannot read is said on stderr, never on stdout (the protocol's), and it
exits 2 without serving; with settings it serves those."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memstream_client.mcp_server import stdio
from memstream_client.sdk import Config


def test_an_unreadable_config_is_said_on_stderr_and_nothing_is_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    served: list[Config] = []
    monkeypatch.setattr(stdio, "serve_stdio", served.append)
    monkeypatch.setenv("MEMSTREAM_CONFIG", str(tmp_path / "missing.toml"))
    assert stdio.main() == 2
    said = capsys.readouterr()
    assert said.out == ""
    assert said.err == f"memstream-mcp: config file {tmp_path / 'missing.toml'} does not exist\n"
    assert served == []


def test_it_serves_with_the_settings_of_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    served: list[Any] = []
    monkeypatch.setattr(stdio, "serve_stdio", served.append)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("MEMSTREAM_CONFIG", raising=False)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("MEMSTREAM_URL", "http://127.0.0.1:7001/")
    monkeypatch.setenv("MEMSTREAM_API_KEY", "msk_test")
    monkeypatch.setenv("MEMSTREAM_NAMESPACE", "team-a")
    assert stdio.main() == 0
    (config,) = served
    assert (config.url, config.key, config.namespace) == (
        "http://127.0.0.1:7001", "msk_test", "team-a")
