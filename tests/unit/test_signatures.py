import os
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from processors.runs.signatures import ErrorSignature, signature_of

ROOT = Path(__file__).resolve().parents[2]

PYTHON_TRACE = '''Traceback (most recent call last):
  File "/srv/app/app/views.py", line {a}, in get
    user = load_user(uid)
  File "/srv/app/.venv/lib/python3.11/site-packages/flask/app.py", line {b}, in wsgi_app
    response = self.full_dispatch_request()
  File "/srv/app/app/models.py", line {c}, in load_user
    raise NotFound(f"user {{user_id}} not found")
app.errors.NotFound: user {ident} not found
'''

JVM_TRACE = '''java.lang.IllegalStateException: order {ident} failed
\tat com.acme.orders.OrderService.place(OrderService.java:{a})
Caused by: java.sql.SQLException: Connection refused: db-{b}.internal:5432
\tat org.postgresql.Driver.connect(Driver.java:{c})
\t... {b} more
'''

NODE_TRACE = '''TypeError: Cannot read properties of undefined (reading '{ident}')
    at getUser (/srv/app/src/users.js:{a}:{b})
    at /srv/app/src/index.js:{c}:3
'''

GO_TRACE = '''panic: runtime error: index out of range [{a}] with length {b}

goroutine {c} [running]:
main.lookup(...)
\t/home/dev/proj/cmd/server/main.go:{a}
main.main()
\t/home/dev/proj/cmd/server/main.go:{b} +0x1d
'''

RUST_TRACE = '''thread 'main' panicked at src/config.rs:{a}:{b}:
missing key {ident}
stack backtrace:
   0: rust_begin_unwind
             at /rustc/90c541806f23a127002de5b4038be731ba1458ca/library/std/src/panicking.rs:{c}:5
   3: myapp::config::load
             at ./src/config.rs:{a}:{b}
'''

TRACES = (PYTHON_TRACE, JVM_TRACE, NODE_TRACE, GO_TRACE, RUST_TRACE)

line_numbers = st.integers(min_value=1, max_value=99_999)
# Ids of one digit glued to a short word ("node7") read as device names (eth0, sda1) and are
# kept, by design: see processors/runs/masking.py.
identifiers = st.builds(
    lambda prefix, number, separator: f"{prefix}{separator}{number}",
    st.sampled_from(["", "u", "order", "req", "blk", "job"]),
    st.integers(min_value=10, max_value=10**12),
    st.sampled_from(["", "-", "_"]),
) | st.integers(min_value=0, max_value=9).map(lambda digit: f"order-{digit}")
path_parts = st.from_regex(r"[A-Za-z0-9_-]{1,10}(\.[a-z]{1,4})?", fullmatch=True)
paths = st.lists(path_parts, min_size=2, max_size=6).map(lambda parts: "/" + "/".join(parts))
TIMESTAMP_FORMATS = (
    "%Y-%m-%dT%H:%M:%S.%fZ",
    "%Y-%m-%d %H:%M:%S,%f",
    "%b %d %H:%M:%S",
    "%a %b %d %H:%M:%S %Y",
    "%d/%b/%Y:%H:%M:%S +0000",
)
timestamps = st.builds(
    lambda moment, layout: moment.strftime(layout),
    st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2090, 1, 1)),
    st.sampled_from(TIMESTAMP_FORMATS),
)


def test_the_signature_is_the_documented_shape() -> None:
    signature = signature_of(PYTHON_TRACE.format(a=1, b=2, c=3, ident="u-1"))
    assert isinstance(signature, ErrorSignature)
    assert re.fullmatch(r"sig_[0-9a-f]{20}", signature.signature_id)
    assert signature.dialect == "python"
    assert signature.exception_type == "app.errors.NotFound"
    assert signature.template == "user <*> not found"
    assert signature.frames == ("app/models.py:load_user", "app/views.py:get")


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(TRACES), line_numbers, line_numbers, line_numbers, identifiers)
def test_traces_keep_their_id_whatever_the_line_numbers_and_ids(
    trace: str, a: int, b: int, c: int, ident: str
) -> None:
    assert (signature_of(trace.format(a=a, b=b, c=c, ident=ident))
            == signature_of(trace.format(a=7, b=8, c=9, ident="u-1")))


@settings(max_examples=80, deadline=None)
@given(identifiers, st.uuids(), paths, timestamps)
def test_messages_keep_their_id_whatever_the_variables(
    ident: str, uuid: object, path: str, timestamp: str
) -> None:
    message = "order {} of user {} could not be written to {} at {}: disk full"
    reference = signature_of(message.format(
        "42", "00000000-0000-0000-0000-000000000000", "/var/data/out.json", "2024-01-01 00:00:00"))
    assert signature_of(message.format(ident, uuid, path, timestamp)) == reference


@settings(max_examples=40, deadline=None)
@given(timestamps, st.sampled_from(["ERROR", "WARN", "[ERROR]", "E"]),
       st.sampled_from(["", "[main] ", "[pool-1-thread-3] ", "1234 "]))
def test_leading_log_noise_does_not_change_the_id(
    timestamp: str, level: str, thread: str
) -> None:
    message = "connection to db-3 lost after 30s"
    assert signature_of(f"{timestamp} {level} {thread}{message}") == signature_of(message)


def test_different_errors_have_different_ids() -> None:
    messages = [
        "connection refused",
        "connection reset by peer",
        "KeyError: 'user'",
        "ValueError: 'user'",
        "Too many authentication failures for admin",
        "Too many authentication failures for root",
    ]
    assert len({signature_of(message).signature_id for message in messages}) == len(messages)


def test_the_same_error_in_another_dialect_or_place_has_another_id() -> None:
    python = signature_of(PYTHON_TRACE.format(a=1, b=2, c=3, ident="u-1"))
    moved = signature_of(PYTHON_TRACE.format(a=1, b=2, c=3, ident="u-1").replace(
        "load_user", "find_user"))
    alone = signature_of("app.errors.NotFound: user u-1 not found")
    assert len({python.signature_id, moved.signature_id, alone.signature_id}) == 3


def test_the_cli_gives_the_same_ids_in_separate_processes() -> None:
    lines = [
        "Connection closed by 10.0.0.1 [preauth]",
        "Invalid user webmaster from 173.234.31.186",
        "Block rdd_42_7 stored as bytes in memory (estimated size 16.0 B, free 317.5 KB)",
        "KeyError: 'missing'",
        "a form feed \x0c does not end a line",
        "",
    ]
    stdin = "\n".join(lines) + "\n"

    def run(seed: str) -> list[str]:
        result = subprocess.run(
            [sys.executable, "-m", "processors.runs.signatures"], input=stdin, capture_output=True,
            text=True, check=True, cwd=ROOT, env={**os.environ, "PYTHONHASHSEED": seed},
        )
        return result.stdout.splitlines()

    first, second = run("1"), run("2")
    assert first == second
    assert first == [signature_of(line).signature_id for line in lines]
