"""The README's tour, as a new user takes it: `make run` on fresh data, the development key
read from the frame its first start ends with, every `sh tour` block of README.md run in order
in one shell, then Ctrl-C. A tour that no longer works, a start that says more than a person
needs, or a stop that prints a traceback fails here.

`make run` listens where the README says it does (the API on 6066, the consolidator on 6067,
the MCP server on 6070, the broker on 19092), so this test needs those ports free: stop a
`make run` of your own first.
Its data goes to a scratch directory, never to `var/`."""

from __future__ import annotations

import functools
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.stack import Broker
from stores.postgres.local_server import LocalPostgres
from streams.plumbing.config import REPO_ROOT

pytestmark = pytest.mark.integration

README = REPO_ROOT / "README.md"
PORTS = {"the API": 6066, "the consolidator": 6067, "the MCP server": 6070,
         "the broker": 19092, "the broker's controller": 19093}
START_TIMEOUT_S = 240.0
KEY = re.compile(r"export MEMSTREAM_API_KEY=(msk_\S+)")
RULE = re.compile(r"\| ─{20,}$")
# What a clean start or stop never prints.
NOISE = re.compile(r"Traceback|ERROR|FATAL|WARN|Exception")


def tour_blocks(markdown: str) -> list[str]:
    """The shell blocks of the tour, marked by the fence's info string `sh tour`."""
    return re.findall(r"^```sh tour\n(.*?)^```$", markdown, flags=re.S | re.M)


def tour_script(blocks: list[str]) -> str:
    """One shell for every block, so that each sees what the ones before it set; it stops at
    the first command that fails and says which block that was."""
    steps = [f"{block}echo '== tour block {number} done' >&2\n"
             for number, block in enumerate(blocks, 1)]
    return "set -euo pipefail\n" + "".join(steps)


@dataclass
class Console:
    """The lines `make run` prints, collected as they come."""

    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    reader: threading.Thread = field(init=False)

    def __post_init__(self) -> None:
        self.reader = threading.Thread(target=self._collect, daemon=True)
        self.reader.start()

    def _collect(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, pattern: re.Pattern[str], after: int, timeout_s: float) -> int:
        """The index of the first line from `after` on that matches."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for index in range(after, len(self.lines)):
                if pattern.search(self.lines[index]):
                    return index
            if self.process.poll() is not None and not any(
                    pattern.search(line) for line in self.lines[after:]):
                pytest.fail("make run exited:\n" + "\n".join(self.lines[-40:]))
            time.sleep(0.2)
        pytest.fail(f"no {pattern.pattern!r} from make run after {timeout_s}s:\n"
                    + "\n".join(self.lines[-40:]))


def port_free(port: int) -> bool:
    """Whether nothing listens on `port` (connections of a stopped server that linger in
    TIME_WAIT do not count: a server binds past them, as this probe does)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


@pytest.fixture
def scratch_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """`make run`'s environment with its data under `tmp_path`; what is left running there
    is stopped at the end."""
    taken = [f"{what} ({port})" for what, port in PORTS.items() if not port_free(port)]
    if taken:
        pytest.fail(f"make run's ports are taken: {', '.join(taken)}; stop `make run` first")
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("MEMSTREAM_", "KAFKA_", "MAKE", "MFLAGS"))}
    env.update(KAFKA_DATA_DIR=str(tmp_path / "kafka"), MEMSTREAM_PG_DATA=str(tmp_path / "pg"),
               MEMSTREAM_DATA_DIR=str(tmp_path / "var"),
               MEMSTREAM_INDEX_URL=f"edge://{tmp_path / 'index'}", HOME=str(tmp_path))
    yield env
    Broker(tmp_path / "kafka").stop()
    LocalPostgres(tmp_path / "pg").stop()


def test_the_readme_tour_runs_as_written_from_a_first_make_run(
        scratch_env: dict[str, str]) -> None:
    blocks = tour_blocks(README.read_text())
    assert len(blocks) >= 8, "the tour's blocks are marked ```sh tour"
    # A terminal's job: Ctrl-C at its default even when the tests run as a background job.
    make = subprocess.Popen(["make", "run"], cwd=REPO_ROOT, env=scratch_env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, preexec_fn=functools.partial(
                                signal.signal, signal.SIGINT, signal.SIG_DFL))
    console = Console(make)
    try:
        # The first start ends with the key, framed, once both processes serve.
        key_line = console.wait_for(KEY, 0, START_TIMEOUT_S)
        match = KEY.search(console.lines[key_line])
        assert match is not None
        key = match.group(1)
        frame_end = console.wait_for(RULE, key_line, 10)
        deadline = time.monotonic() + 60
        while not (healthy(6066) and healthy(6067)):
            assert time.monotonic() < deadline, "the worker or the consolidator is not healthy"
            time.sleep(0.5)
        time.sleep(3)
        start = console.lines[:frame_end + 1]
        assert console.lines[frame_end + 1:] == [], "the key is the last thing make run says"
        assert not [line for line in start if NOISE.search(line)], "\n".join(start)

        tour = subprocess.run(["bash", "-c", tour_script(blocks)], cwd=REPO_ROOT,
                              env={**scratch_env, "MEMSTREAM_API_KEY": key},
                              capture_output=True, text=True, timeout=300)
        done = re.findall(r"== tour block (\d+) done", tour.stderr)
        assert tour.returncode == 0, (
            f"tour block {len(done) + 1} of {len(blocks)} failed:\n"
            f"{blocks[len(done)]}\nstdout:\n{tour.stdout[-3000:]}\nstderr:\n"
            f"{tour.stderr[-3000:]}")
        assert len(done) == len(blocks)
        # What each step shows: the memory written with kcat found by meaning, the fix of the
        # error, the approved update, both memories in the CLI.
        assert "the bastion host rejects other traffic" in tour.stdout
        assert '"run_id": "pay-2"' in tour.stdout and '"9f1c2ab"' in tour.stdout
        assert '"change":"approved"' in tour.stdout
        assert "4.4 restores refunds" in tour.stdout
        assert '"kind": "fix_pattern"' in tour.stdout, "the context pack has the fix pattern"
    finally:
        stopping = len(console.lines)
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGINT)  # Ctrl-C in the terminal of `make run`
        try:
            code = make.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(make.pid, signal.SIGKILL)
            raise
    console.reader.join(10)
    stop = console.lines[stopping:]
    # make takes the terminal's SIGINT too and ends by it, silently, once its recipe is done.
    assert code in (0, -signal.SIGINT), "\n".join(stop)
    assert not [line for line in stop if NOISE.search(line)], "\n".join(stop)
