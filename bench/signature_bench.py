"""Error-signature throughput on one core.

    python -m bench.signature_bench [--messages 20000] [--seconds 3]

``run_signature_bench`` times ``signature_of`` on generated log lines of about 100 characters
(a fixed seed: the same lines in every run) and on whole stack traces of every dialect, in
one process, so on one core. Target: >= 20,000 log lines/s.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from processors.runs.signatures import signature_of

# Shaped like real log lines: ids, addresses, paths, sizes and timestamps among plain words.
LINE_TEMPLATES = (
    "Failed password for invalid user {word} from {ip} port {port} ssh2 after {n} attempts",
    "Block rdd_{n}_{n} stored as bytes in memory (estimated size {size} KB, free {size} MB)",
    "Connection to db-{n}.internal:{port} refused while saving order {uuid} for tenant {word}",
    "{ts} ERROR [worker-{n}] c.a.o.OrderService - payment {hex} declined: insufficient funds",
    "Could not read config from {path}: permission denied (uid={n}, gid={n}) on host {word}",
    "Received block blk_-{long} of size {long} from /{ip}:{port} in {n} ms, retrying later",
    "KeyError: 'user_{n}' while loading session {uuid} from cache node {ip} (attempt {n})",
    "GET {url} returned 503 Service Unavailable in {n} ms; will retry request {hex}",
)
WORDS = ("admin", "root", "webmaster", "alice", "scheduler", "billing", "eu-west", "ingest")


def log_lines(count: int, seed: int = 0) -> list[str]:
    """`count` generated log lines, the same for the same seed."""
    rng = random.Random(seed)
    fillers: dict[str, Callable[[], str]] = {
        "word": lambda: rng.choice(WORDS),
        "ip": lambda: ".".join(str(rng.randrange(256)) for _ in range(4)),
        "port": lambda: str(rng.randrange(1024, 65536)),
        "n": lambda: str(rng.randrange(1000)),
        "long": lambda: str(rng.randrange(10**15, 10**18)),
        "size": lambda: f"{rng.uniform(0, 999):.1f}",
        "hex": lambda: f"{rng.getrandbits(48):012x}",
        "uuid": lambda: "-".join(f"{rng.getrandbits(4 * k):0{k}x}" for k in (8, 4, 4, 4, 12)),
        "ts": lambda: f"2026-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d} "
                      f"{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}",
        "path": lambda: "/srv/" + "/".join(rng.choice(WORDS) for _ in range(3)) + ".yaml",
        "url": lambda: f"https://api.example.com/v1/orders/{rng.randrange(10**6)}?page=2",
    }
    field = re.compile(r"\{(\w+)\}")
    return [field.sub(lambda match: fillers[match[1]](), rng.choice(LINE_TEMPLATES))
            for _ in range(count)]


TRACES = (
    'Traceback (most recent call last):\n  File "/srv/app/app/views.py", line 10, in get\n'
    '    user = load_user(uid)\n  File "/srv/app/app/models.py", line 44, in load_user\n'
    '    raise NotFound(user_id)\napp.errors.NotFound: user u-123 not found\n',
    "java.lang.IllegalStateException: order 42 failed\n"
    "\tat com.acme.orders.OrderService.place(OrderService.java:57)\n"
    "Caused by: java.sql.SQLException: Connection refused: db.internal:5432\n"
    "\tat org.postgresql.Driver.connect(Driver.java:285)\n\t... 1 more\n",
    "TypeError: Cannot read properties of undefined (reading 'id')\n"
    "    at getUser (/srv/app/src/users.js:12:17)\n"
    "    at processTicksAndRejections (node:internal/process/task_queues:95:5)\n",
    "panic: runtime error: index out of range [5] with length 3\n\ngoroutine 1 [running]:\n"
    "main.lookup(...)\n\t/home/dev/proj/main.go:14\n"
    "main.main()\n\t/home/dev/proj/main.go:20 +0x1d\n",
    "thread 'main' panicked at src/config.rs:12:5:\ncalled `Option::unwrap()` on a `None` value\n"
    "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n",
)


def _rate(texts: Sequence[str], seconds: float) -> float:
    """Texts/s of signature_of over `texts`, in whole passes for at least `seconds`."""
    done = 0
    start = time.perf_counter()
    while True:
        for text in texts:
            signature_of(text)
        done += len(texts)
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return done / elapsed


def run_signature_bench(messages: int = 20_000, seconds: float = 3.0,
                        rounds: int = 3) -> dict[str, Any]:
    """Log lines/s and stack traces/s of signature_of on one core (median of rounds)."""
    lines = log_lines(messages)
    traces = list(TRACES) * 200
    per_round = seconds / (2 * rounds)
    line_rates = [_rate(lines, per_round) for _ in range(rounds)]
    trace_rates = [_rate(traces, per_round) for _ in range(rounds)]
    return {
        "messages": len(lines),
        "mean_chars": statistics.fmean(len(line) for line in lines),
        "lines_per_s": statistics.median(line_rates),
        "traces_per_s": statistics.median(trace_rates),
    }


def signature_rows(result: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(measure, value, target) rows for the `make bench` table."""
    return [
        (f"signatures, log lines (~{result['mean_chars']:.0f} chars, one core)",
         f"{result['lines_per_s']:.0f} /s", ">= 20000"),
        ("signatures, stack traces of 5 dialects (one core)",
         f"{result['traces_per_s']:.0f} /s", ""),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.signature_bench", description=__doc__)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args(argv)
    result = run_signature_bench(args.messages, args.seconds)
    for name, value, target in signature_rows(result):
        print(f"{name:62}  {value:>16}  {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
