"""A real local stack in a scratch directory: the Kafka broker (infra/kafka/broker.sh), an
embedded Postgres and worker processes (`python -m streams.worker`), each on free ports.

Used by the integration tests and the benchmarks; nothing here is mocked.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from embedder.models import DEFAULT_MODEL, model_dir, spec
from stores.postgres.local_server import LocalPostgres
from streams.app import group_id
from streams.plumbing.config import REPO_ROOT
from streams.wiring import Role

BROKER_SCRIPT = REPO_ROOT / "infra" / "kafka" / "broker.sh"
# The embedding model of the workers a stack starts, and of the tests and benches that embed
# beside them: the product's default unless MEMSTREAM_MODEL names another.
MODEL = spec(os.environ.get("MEMSTREAM_MODEL", DEFAULT_MODEL))
MODEL_DIR = model_dir(MODEL.name)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Broker:
    data_dir: Path
    bootstrap: str = ""
    # Chosen at the first start and kept: a restarted broker is where its clients left it.
    port: int = field(default_factory=free_port)
    controller_port: int = field(default_factory=free_port)
    # More of broker.sh's settings, such as the secured listeners (KAFKA_SECURE_LISTENERS).
    extra_env: dict[str, str] = field(default_factory=dict)
    create_topics: bool = True

    def start(self) -> str:
        env = {**os.environ, "KAFKA_DATA_DIR": str(self.data_dir),
               "KAFKA_PORT": str(self.port), "KAFKA_CONTROLLER_PORT": str(self.controller_port),
               **self.extra_env}
        result = subprocess.run([str(BROKER_SCRIPT), "start"], env=env, capture_output=True,
                                text=True)
        if result.returncode != 0:
            raise RuntimeError(f"broker did not start: {result.stderr.strip()}")
        self.bootstrap = result.stdout.strip().splitlines()[-1]
        if self.create_topics:
            # As the worker would at its start, so that events can be produced before one runs.
            subprocess.run([sys.executable, "-m", "streams.commands.topics", "--bootstrap",
                            self.bootstrap], cwd=REPO_ROOT, check=True, capture_output=True)
        return self.bootstrap

    def listener(self, protocol: str) -> str:
        """The address of the secured listener of `protocol` (SASL_SSL, ...)."""
        return (self.data_dir / f"bootstrap.{protocol.lower()}").read_text().strip()

    def kill(self) -> None:
        """kill -9: no shutdown, no flush; `start()` again recovers the same data dir."""
        pid = int((self.data_dir / "pid").read_text())
        kill_and_reap(pid)

    def stop(self) -> None:
        env = {**os.environ, "KAFKA_DATA_DIR": str(self.data_dir)}
        subprocess.run([str(BROKER_SCRIPT), "stop"], env=env, check=False, capture_output=True)


def kill_and_reap(pid: int, timeout_s: float = 30.0) -> None:
    """SIGKILL `pid` and wait until it is gone (it need not be our child)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout_s
    while Path(f"/proc/{pid}").exists():
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        if time.monotonic() > deadline:
            raise TimeoutError(f"pid {pid} still alive {timeout_s}s after SIGKILL")
        time.sleep(0.05)


def crash_postgres(server: LocalPostgres, timeout_s: float = 30.0) -> None:
    """kill -9 the postmaster, then wait for its backends to notice and exit, as after a
    power cut of the server alone: `server.start()` then recovers from the write-ahead log."""
    pid = server.running_pid()
    if pid is None:
        raise RuntimeError(f"no Postgres runs on {server.data_dir}")
    kill_and_reap(pid, timeout_s)
    deadline = time.monotonic() + timeout_s
    while _children_of_data_dir(server.data_dir):
        if time.monotonic() > deadline:
            raise TimeoutError(f"Postgres backends on {server.data_dir} outlived the postmaster")
        time.sleep(0.05)


def _children_of_data_dir(data_dir: Path) -> list[int]:
    """Postgres processes still attached to `data_dir`'s shared memory (its backends)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if str(data_dir) in (entry / "cmdline").read_bytes().decode(errors="replace") or \
                    (entry / "cwd").resolve() == data_dir:
                found.append(int(entry.name))
        except (OSError, ValueError):
            continue
    return [pid for pid in found if pid != os.getpid()]


@dataclass
class Worker:
    """One worker process of a role; `kill()` is kill -9, `start()` again resumes the same
    group."""

    bootstrap: str
    pg_dsn: str
    index_url: str
    log_path: Path
    app_id: str = field(default_factory=lambda: f"memstream-{uuid.uuid4().hex[:8]}")
    role: Role = "ingest"
    # The entry point; tests that inject failures run a wrapper of streams.worker.
    module: str = "streams.worker"
    web_port: int = field(default_factory=free_port)
    extra_env: dict[str, str] = field(default_factory=dict)
    # The stack's operator key, for the HTTP API.
    api_key: str = ""
    process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    @property
    def headers(self) -> dict[str, str]:
        """What a request to the HTTP API carries: the operator key."""
        return {"Authorization": f"Bearer {self.api_key}"}

    @property
    def group(self) -> str:
        """The consumer group this process is a member of."""
        return group_id(self.app_id, self.role)

    def start(self, timeout_s: float = 90.0) -> None:
        env = {
            **os.environ,
            "MEMSTREAM_KAFKA_BOOTSTRAP": self.bootstrap,
            "MEMSTREAM_PG_DSN": self.pg_dsn,
            "MEMSTREAM_INDEX_URL": self.index_url,
            "MEMSTREAM_MODEL": MODEL.name,
            "MEMSTREAM_APP_ID": self.app_id,
            "MEMSTREAM_WEB_PORT": str(self.web_port),
            "MEMSTREAM_DATA_DIR": str(self.log_path.parent),
            **self.extra_env,
        }
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", self.module, "--role", self.role], cwd=REPO_ROOT,
            env=env,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        self._wait_healthy(timeout_s)

    def _wait_healthy(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"worker exited with {self.process.returncode}; "
                                   f"see {self.log_path}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/healthz", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.2)
        raise TimeoutError(f"worker not healthy after {timeout_s}s; see {self.log_path}")

    def kill(self) -> None:
        """kill -9: no shutdown, no final commit."""
        if self.process is not None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            self.process = None

    def stop(self, timeout_s: float = 30.0) -> None:
        if self.process is None:
            return
        if self.process.poll() is not None:
            self.process = None
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
        self.process = None


@dataclass
class Stack:
    """Broker and Postgres under `root`; workers are started on demand. `durable` Postgres
    fsyncs its commits, for tests that crash it."""

    root: Path
    durable: bool = False
    broker: Broker = field(init=False)
    postgres: LocalPostgres = field(init=False)
    pg_dsn: str = ""
    # A key of every permission in every namespace, made at start, for the tests' requests.
    operator_key: str = ""
    workers: list[Worker] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.broker = Broker(self.root / "kafka")
        self.postgres = LocalPostgres(self.root / "postgres", durable=self.durable)

    def start(self) -> Stack:
        self.root.mkdir(parents=True, exist_ok=True)
        self.broker.start()
        self.pg_dsn = self.postgres.start()
        self.operator_key = self.make_key("--all-namespaces", "--perm", "admin",
                                          "--label", "harness")
        return self

    def make_key(self, *grant: str) -> str:
        """The token of a new key (`python -m streams.commands.keys create` arguments)."""
        made = subprocess.run(
            [sys.executable, "-m", "streams.commands.keys", "create", *grant], cwd=REPO_ROOT,
            env={**os.environ, "MEMSTREAM_PG_DSN": self.pg_dsn}, capture_output=True,
            check=True, text=True)
        token: str = json.loads(made.stdout)["token"]
        return token

    def worker(self, name: str = "worker", *, index_url: str | None = None,
               app_id: str | None = None, module: str = "streams.worker",
               **extra_env: str) -> Worker:
        """An ingest worker on the stack's index (the embedded engine under `root`, unless
        `index_url` names another), in a consumer group of its own unless `app_id` names
        another worker's."""
        worker = Worker(
            bootstrap=self.broker.bootstrap, pg_dsn=self.pg_dsn,
            index_url=index_url or f"edge://{self.root / 'index'}",
            log_path=self.root / f"{name}.log", module=module, extra_env=extra_env,
            api_key=self.operator_key,
        )
        if app_id is not None:
            worker.app_id = app_id
        self.workers.append(worker)
        return worker

    def consolidator(self, of: Worker, name: str = "consolidator",
                     **extra_env: str) -> Worker:
        """The consolidator process beside ingest worker `of` (same app id, as in the
        Procfile)."""
        process = Worker(
            bootstrap=self.broker.bootstrap, pg_dsn=self.pg_dsn, index_url=of.index_url,
            log_path=self.root / f"{name}.log", app_id=of.app_id, role="consolidator",
            extra_env={**of.extra_env, **extra_env}, api_key=self.operator_key,
        )
        self.workers.append(process)
        return process

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop everything, each part even if stopping another failed."""
        with contextlib.ExitStack() as stopping:
            stopping.callback(self.postgres.stop)
            stopping.callback(self.broker.stop)
            for worker in self.workers:
                stopping.callback(worker.stop)
