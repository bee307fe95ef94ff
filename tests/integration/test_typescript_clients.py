"""The API's answers proven from TypeScript (issue 38), on the real stack.

tests/typescript/ is a small TypeScript project (its npm packages pinned by its
package-lock.json, installed by infra/setup.sh into .cache/node/ and linked as its
node_modules). Copied into a test's folder, it is built as docs/http-api.md says, each command
as written there: the worker's GET /v1/openapi.json fetched, its types generated with
openapi-typescript, the programs compiled by `tsc` (strict) and run:

- src/http_check.ts (openapi-fetch) writes a memory, searches it, reads the context pack and
  the record, each answer's fields read through the generated types and each answer held at
  run time against the schema the document declares for it (ajv);
- src/mcp_check.ts (the official MCP SDK's client, over streamable HTTP) has two agents' keys
  wake, remember, recall, rate, sleep and wake again to the handoff, and the other agent never
  sees the first one's personal memory (docs/mcp.md).

That a drift fails them is shown too: types generated from a doctored copy of the document
do not compile, and answers doctored on their way (a proxy between the program and the
worker) fail the run with the field that drifted."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from harness.stack import Stack, Worker
from streams.plumbing.config import REPO_ROOT
from tests.integration.test_mcp import mcp_url

pytestmark = pytest.mark.integration

__all__ = ["mcp_url"]  # the fixture, shared with test_mcp.py
CHECKS = REPO_ROOT / "tests" / "typescript"
GUIDE = REPO_ROOT / "docs" / "http-api.md"
# What one command of the guide may take: type generation and `tsc` take seconds, the
# programs wait up to 30 s each for what they wrote to be found.
COMMAND_TIMEOUT_S = 180


def guide_commands() -> list[str]:
    """The commands of docs/http-api.md's TypeScript section, one per line as written."""
    section = GUIDE.read_text().split("### Checked from TypeScript", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None, "docs/http-api.md shows no commands for TypeScript"
    # The first goes to tests/typescript/; the test runs the others in a copy of it.
    cd, *commands = block.group(1).strip().splitlines()
    assert cd == "cd tests/typescript"
    return commands


def as_written(command: str, base_url: str, key: str, namespace: str,
               mcp: str = "") -> str:
    """A guide's command with the test's worker, MCP server, key and namespace in place of
    its own."""
    return (command.replace("http://localhost:6070/mcp", mcp)
            .replace("http://localhost:6066", base_url)
            .replace("localhost:6066", base_url.removeprefix("http://"))
            .replace("msk_…", key).replace("team-a", namespace))


def project(root: Path) -> Path:
    """A copy of tests/typescript/ to build in, with the installed packages linked."""
    modules = CHECKS / "node_modules"
    assert (modules / ".bin" / "tsc").exists(), (
        f"{modules} is not installed: `make setup` (infra/setup.sh) installs it")
    folder = root / "typescript"
    folder.mkdir()
    for name in ("package.json", "package-lock.json", "tsconfig.json"):
        shutil.copy(CHECKS / name, folder / name)
    shutil.copytree(CHECKS / "src", folder / "src",
                    ignore=shutil.ignore_patterns("generated"))
    (folder / "node_modules").symlink_to(modules.resolve())
    return folder


def run(command: str, folder: Path, env: dict[str, str] | None = None,
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], cwd=folder, capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT_S, env={**os.environ, **(env or {})})


def succeeded(command: str, folder: Path,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = run(command, folder, env)
    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
    return done


def last_json(output: str) -> dict[str, Any]:
    line = output.strip().splitlines()[-1]
    answer: dict[str, Any] = json.loads(line)
    return answer


@pytest.fixture(scope="module")
def built(worker: Worker, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/typescript/ built against the running worker by the guide's commands up to
    the compiler's (those that run a program come after, in the tests)."""
    folder = project(tmp_path_factory.mktemp("ts-built"))
    for command in guide_commands():
        if command.startswith(("node ", "MEMSTREAM_")):
            continue
        succeeded(as_written(command, worker.base_url, "", ""), folder)
    assert (folder / "out" / "http_check.js").exists()
    assert (folder / "out" / "mcp_check.js").exists()
    return folder


def program_command(name: str) -> str:
    (command,) = [line for line in guide_commands() if f"out/{name}.js" in line]
    return command


def test_the_guides_commands_build_and_the_http_program_passes_against_the_worker(
    stack: Stack, worker: Worker, built: Path, namespace: str,
) -> None:
    key = stack.make_key("--namespace", namespace, "--perm", "read,write")
    done = succeeded(as_written(program_command("http_check"), worker.base_url, key,
                                namespace), built)
    print(done.stdout)
    answer = last_json(done.stdout)
    assert answer["record_id"].startswith("mem_")
    assert answer["version"] == 1
    # The write, at least one search, the context pack and the record: each checked.
    assert answer["answers_checked"] >= 4
    assert {"record", "versions"} <= set(answer["lineage"])


def test_two_agents_keys_hold_an_mcp_session_from_the_official_typescript_sdk(
    stack: Stack, built: Path, mcp_url: str, namespace: str,
) -> None:
    keys = {f"{agent.upper()}_KEY": stack.make_key("--namespace", namespace, "--perm",
                                                   "read,write", "--agent", agent)
            for agent in ("ann", "bob")}
    done = succeeded(as_written(program_command("mcp_check"), "", "", namespace, mcp_url),
                     built, keys)
    print(done.stdout)
    answer = last_json(done.stdout)
    assert answer["personal"] != answer["shared"]
    assert answer["handoff"].startswith("mem_")
    assert answer["rated"] == 2
    # B recalled the shared memory, and read A's personal one as not found.
    assert answer["b_recalled"] >= 1
    assert answer["b_not_found"] == [answer["personal"]]


# ---------------------------------------------------------------- a drift fails the check

def doctored(document: dict[str, Any], schema: str,
             change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    copy: dict[str, Any] = json.loads(json.dumps(document))
    change(copy["components"]["schemas"][schema])
    return copy


def relevance_as_text(schema: dict[str, Any]) -> None:
    schema["properties"]["relevance"] = {"type": "string"}


def without_record_id(schema: dict[str, Any]) -> None:
    del schema["properties"]["record_id"]


def session_id_as_number(schema: dict[str, Any]) -> None:
    schema["properties"]["session_id"] = {"type": "integer"}


@pytest.mark.parametrize(("schema", "change", "program", "field", "error"), [
    ("SearchHit", relevance_as_text, "http_check", "hit.relevance",
     "error TS2322: Type 'string' is not assignable to type 'number'."),
    # Left out, the field is only one of the answer's open `additionalProperties`.
    ("MemoryWritten", without_record_id, "http_check", "outcome.record_id",
     "error TS2322: Type '{}' is not assignable to type 'string'."),
    ("Woke", session_id_as_number, "mcp_check", "woke.session_id",
     "error TS2322: Type 'number' is not assignable to type 'string'."),
], ids=["http-a-field-of-another-type", "http-a-field-missing", "mcp-wake-another-type"])
def test_types_generated_from_a_doctored_document_do_not_compile(
    worker: Worker, built: Path, tmp_path: Path, schema: str,
    change: Callable[[dict[str, Any]], None], program: str, field: str, error: str,
) -> None:
    folder = project(tmp_path)
    document = json.loads((built / "memstream-openapi.json").read_text())
    (folder / "memstream-openapi.json").write_text(json.dumps(doctored(document, schema,
                                                                       change)))
    compiled = None
    for command in guide_commands():
        if command.startswith("curl "):
            continue  # the doctored copy stands in for the worker's document
        if command.startswith(("node ", "MEMSTREAM_")):
            break
        compiled = run(as_written(command, worker.base_url, "", ""), folder)
        if compiled.returncode != 0:
            break
    # The compiler's the failure (the guide's commands up to it passed with the worker's
    # document, in `built`), in the program that reads the doctored field.
    assert compiled is not None and compiled.returncode != 0, "the doctored types compiled"
    assert compiled.args[-1].startswith("node_modules/.bin/tsc ")
    print(compiled.stdout)
    (failure,) = compiled.stdout.strip().splitlines()
    where = re.fullmatch(rf"src/{program}\.ts\((\d+),\d+\): (.*)", failure)
    assert where is not None and where.group(2) == error, failure
    line = (folder / "src" / f"{program}.ts").read_text().splitlines()[int(where.group(1)) - 1]
    assert field in line, (failure, line)


# What a proxy does to an answer: given the request's path and JSON body (None if it has
# none) and the answer's JSON, changes it in place and says whether it did.
Doctor = Callable[[str, Any, Any], bool]
HOP_BY_HOP = {"host", "content-length", "connection", "transfer-encoding", "keep-alive"}


class DoctoringProxy:
    """An HTTP proxy in front of a server (the worker, the MCP server) that passes every
    request and answer on, but changes the JSON answers its doctor picks first."""

    def __init__(self, upstream: str, doctor: Doctor) -> None:
        self.doctored = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                sent = self.rfile.read(length) if length else None
                request = urllib.request.Request(
                    upstream + self.path, data=sent, method=self.command, headers={
                        name: value for name, value in self.headers.items()
                        if name.lower() not in HOP_BY_HOP})
                try:
                    with urllib.request.urlopen(request, timeout=60) as response:
                        status, headers, body = response.status, response.headers, \
                            response.read()
                except urllib.error.HTTPError as refusal:
                    status, headers, body = refusal.code, refusal.headers, refusal.read()
                except (OSError, http.client.HTTPException):
                    # An event stream the program left open, cut when its server stops.
                    self.close_connection = True
                    return
                if body and status < 300 and "json" in headers.get("Content-Type", ""):
                    answer = json.loads(body)
                    if doctor(self.path.split("?")[0], json.loads(sent) if sent else None,
                              answer):
                        body = json.dumps(answer).encode()
                        proxy.doctored += 1
                self.send_response(status)
                for name, value in headers.items():
                    if name.lower() not in HOP_BY_HOP | {"date", "server"}:
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_DELETE = forward

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> DoctoringProxy:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def hits_relevance_as_text(path: str, sent: Any, answer: Any) -> bool:
    if path != "/v1/search":
        return False
    for hit in answer["hits"]:
        hit["relevance"] = str(hit["relevance"])
    return bool(answer["hits"])


def write_without_event_id(path: str, sent: Any, answer: Any) -> bool:
    if path != "/v1/memories":
        return False
    del answer["event_id"]
    return True


def tool_answer(tool: str, change: Callable[[dict[str, Any]], None]) -> Doctor:
    """Changes the structured answer of an MCP `tools/call` of `tool`."""
    def doctor(path: str, sent: Any, answer: Any) -> bool:
        if not (isinstance(sent, dict) and sent.get("method") == "tools/call" and
                sent["params"]["name"] == tool and "result" in answer):
            return False
        change(answer["result"]["structuredContent"])
        return True
    return doctor


def rated_as_text(structured: dict[str, Any]) -> None:
    structured["rated"] = str(structured["rated"])


def woke_without_session_id(structured: dict[str, Any]) -> None:
    del structured["session_id"]


@pytest.mark.parametrize(("program", "doctor", "error"), [
    ("http_check", hits_relevance_as_text,
     "AnswerDrift: the answer of GET /v1/search (200) drifts from its declared schema: "
     "/hits/0/relevance must be number"),
    ("http_check", write_without_event_id,
     "AnswerDrift: the answer of POST /v1/memories (200) drifts from its declared schema: "
     "/ must have required property 'event_id'"),
    ("mcp_check", tool_answer("wake", woke_without_session_id),
     "AnswerDrift: Woke drifts from its declared schema: / must have required property "
     "'session_id'"),
    ("mcp_check", tool_answer("rate_memories", rated_as_text),
     "AnswerDrift: A: the answer of rate_memories drifts from its declaration: /rated "),
], ids=["http-a-field-of-another-type", "http-a-field-missing", "mcp-wake-a-field-missing",
        "mcp-rate-a-field-of-another-type"])
def test_an_answer_that_drifts_from_its_declared_schema_fails_the_run(
    stack: Stack, worker: Worker, mcp_url: str, built: Path, namespace: str, program: str,
    doctor: Doctor, error: str,
) -> None:
    keys = {f"{agent.upper()}_KEY": stack.make_key("--namespace", namespace, "--perm",
                                                   "read,write", "--agent", agent)
            for agent in (("ann",) if program == "http_check" else ("ann", "bob"))}
    upstream = worker.base_url if program == "http_check" else mcp_url.removesuffix("/mcp")
    with DoctoringProxy(upstream, doctor) as proxy:
        done = run(as_written(program_command(program), proxy.url, keys["ANN_KEY"], namespace,
                              f"{proxy.url}/mcp"), built, keys)
    print(done.stderr)
    assert proxy.doctored >= 1
    assert done.returncode == 1, done.stdout
    assert done.stderr.strip().splitlines()[-1].startswith(error), done.stderr
