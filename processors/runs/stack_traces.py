"""Stack-trace parsing: which dialect an error is written in, what was raised, and where.

Pure functions of the text. Each dialect has a root cause rule (the last exception of a Python
chain, the innermost JVM "Caused by", the first Go panic, the Rust `panicked at` message) and
keeps only in-application frames, without line numbers and with deploy-specific path prefixes
dropped, so that the same failure reads the same after a redeploy or an unrelated edit.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from processors.runs.masking import strip_log_noise

Dialect = Literal["python", "jvm", "javascript", "go", "rust", "message"]

MAX_FRAMES = 3


@dataclass(frozen=True)
class ParsedError:
    dialect: Dialect
    exception_type: str | None
    message: str
    frames: tuple[str, ...]


def parse_error(text: str) -> ParsedError:
    """Split an error into dialect, exception type, message and top in-application frames."""
    text = text.replace("\r\n", "\n").strip()
    if "\n" in text:
        for looks_like, parse in _TRACE_DIALECTS:
            if looks_like(text):
                parsed = parse(text)
                if parsed is not None:
                    return parsed
    return parse_message(text)


# An exception type: a dotted name whose last part ends like an exception class. Requiring
# the suffix keeps log prefixes such as "ERROR:" or "Note:" from passing for a type.
_TYPE = r"(?:[A-Za-z_$][\w$]*\.)*(?=[A-Z])[\w$]*(?:Error|Exception|Exit|Interrupt|Warning|Fault)"
_TYPED_MESSAGE = re.compile(rf"({_TYPE})(?:\s*\[[\w.-]+\])?(?::\s*(.*)|\s*$)", re.DOTALL)


def parse_message(text: str) -> ParsedError:
    """A message without frames; "SomeError: text" still yields its exception type."""
    text = strip_log_noise(text)
    match = _TYPED_MESSAGE.match(text)
    if match:
        return ParsedError("message", match[1], match[2] or "", ())
    return ParsedError("message", None, text, ())


def normalise_path(path: str) -> str:
    """The last two components of a path: stable across checkouts, containers and hosts."""
    path = path.replace("\\", "/")
    for scheme in ("file://", "webpack://"):
        if path.startswith(scheme):
            path = path[len(scheme):]
    return "/".join([part for part in path.split("/") if part not in ("", ".")][-2:])


def _first_frames(frames: Iterable[str]) -> tuple[str, ...]:
    unique: list[str] = []
    for frame in frames:
        if frame not in unique:
            unique.append(frame)
            if len(unique) == MAX_FRAMES:
                break
    return tuple(unique)


# --------------------------------------------------------------------------- Python

_PY_TRACEBACK = "Traceback (most recent call last):"
_PY_FRAME = re.compile(r'^\s*File "([^"]+)", line \d+(?:, in (\S+))?', re.MULTILINE)
_PY_LIBRARY = re.compile(
    r"site-packages|dist-packages|/lib/python\d|/lib/pypy|\\Lib\\|/Python\.framework/|^<"
)


def _parse_python(text: str) -> ParsedError | None:
    # In a chain ("During handling of the above exception..." or "The above exception was the
    # direct cause..."), the last traceback ends with the exception that actually escaped.
    last = text[text.rindex(_PY_TRACEBACK) + len(_PY_TRACEBACK):]
    frames = [(m[1], m[2] or "<module>") for m in _PY_FRAME.finditer(last)]
    exception_line = next(
        (line for line in last.split("\n")
         if line and not line[0].isspace() and not line.startswith(("^", "~"))),
        None,
    )
    if exception_line is None:
        return None
    parsed = parse_message(exception_line)
    exception_type = parsed.exception_type
    message = parsed.message
    if exception_type is None:
        # Custom exceptions need not end in "Error": "mymod.Boom: text" or a bare "Boom".
        name, _, rest = exception_line.partition(": ")
        if re.fullmatch(r"[A-Za-z_][\w.]*", name):
            exception_type, message = name, rest
    in_app = (
        f"{normalise_path(path)}:{function}"
        for path, function in reversed(frames)
        if not _PY_LIBRARY.search(path)
    )
    return ParsedError("python", exception_type, message, _first_frames(in_app))


# --------------------------------------------------------------------------- JVM

# "at pkg.Class.method(File.java:12)", optionally behind a module or class-loader prefix such
# as "java.base/" or "app//", and a lambda's hidden class may end in "/0x0000000800c03000";
# no space before the parenthesis, unlike a JavaScript frame.
_JVM_FRAME = re.compile(
    r"^\s*at (?:[\w.-]+(?:@[\w.-]+)?/+)?([\w$.<>]+(?:/0x[0-9a-f]+)?)\.([\w$<>-]+)\([^()]*\)\s*$"
)
_JVM_CAUSE = re.compile(r"^\s*Caused by:\s*(.*)$")
_JVM_SUPPRESSED = re.compile(r"^\s+Suppressed:\s")
_JVM_MORE = re.compile(r"^\s*\.\.\. \d+ (?:more|common frames omitted)\s*$")
_JVM_HEADER = re.compile(
    rf"(?:Exception in thread \"[^\"]*\"\s+)?({_TYPE}|[a-z][\w$]*(?:\.[\w$]+)*\.[A-Z][\w$]*)"
    r"(?::\s*(.*))?$"
)
_JVM_LIBRARY = (
    "java.", "javax.", "jakarta.", "sun.", "com.sun.", "jdk.", "kotlin.", "kotlinx.", "scala.",
    "org.junit.", "junit.", "org.scalatest.", "groovy.", "org.codehaus.groovy.",
    "org.springframework.", "io.netty.", "reactor.", "akka.", "io.grpc.", "org.gradle.",
    "org.mockito.", "com.fasterxml.", "org.hibernate.", "org.eclipse.jetty.", "okhttp3.",
    "org.apache.catalina.", "org.apache.tomcat.", "org.apache.maven.", "com.google.common.",
)
# Generated names ("lambda$run$0", "$$Lambda$42/0x0000000800c03000", "anonfun$apply$1") carry
# counters that change with unrelated edits.
_JVM_GENERATED = re.compile(r"\$\$Lambda[^.]*|\$\d+|/0x[0-9a-f]+")


@dataclass
class _JvmBlock:
    header: str
    frames: list[str]


def _parse_jvm(text: str) -> ParsedError | None:
    blocks: list[_JvmBlock] = []
    preamble: list[str] = []
    in_suppressed = False
    for line in text.split("\n"):
        frame = _JVM_FRAME.match(line)
        if frame:
            if blocks and not in_suppressed:
                blocks[-1].frames.append(f"{frame[1]}.{frame[2]}")
            elif not blocks and preamble:
                blocks.append(_JvmBlock(_jvm_header(preamble), [f"{frame[1]}.{frame[2]}"]))
            continue
        cause = _JVM_CAUSE.match(line)
        # An indented "Caused by" inside a suppressed exception is that exception's cause.
        if cause and not (in_suppressed and line[:1].isspace()):
            blocks.append(_JvmBlock(cause[1], []))
            in_suppressed = False
        elif cause or _JVM_SUPPRESSED.match(line):
            in_suppressed = True
        elif not blocks and line.strip() and not _JVM_MORE.match(line):
            preamble.append(line.strip())
        elif blocks and not blocks[-1].frames and not in_suppressed and line.strip():
            # A message that goes on over several lines before the first frame.
            blocks[-1].header += " " + line.strip()
    if not blocks:
        return None
    root = blocks[-1]
    header = _JVM_HEADER.search(root.header)
    exception_type, message = (header[1], header[2] or "") if header else (None, root.header)
    for block in reversed(blocks):
        in_app = [_JVM_GENERATED.sub("", f) for f in block.frames if not f.startswith(_JVM_LIBRARY)]
        if in_app:
            return ParsedError("jvm", exception_type, message, _first_frames(in_app))
    return ParsedError("jvm", exception_type, message, ())


def _jvm_header(preamble: list[str]) -> str:
    """The exception line among the lines before the first frame (log lines may precede it)."""
    for index, line in enumerate(preamble):
        if _JVM_HEADER.match(line.removeprefix("Exception in thread ")) or line.startswith(
            "Exception in thread "
        ):
            return " ".join(preamble[index:])
    return preamble[-1]


# --------------------------------------------------------------------------- JavaScript

_JS_FRAME = re.compile(
    r"^\s*at (?:async )?(?:new )?(?:(.+?) \((.+?)(?::\d+){1,2}\)|(.+?)(?::\d+){1,2})\s*$"
)
_JS_ANY_FRAME = re.compile(r"^\s+at .+:\d+:\d+\)?\s*$", re.MULTILINE)
_JS_LIBRARY = re.compile(r"node_modules|^node:|^internal/|^<anonymous>|^native\b|/deps/|^bun:")
_JS_ALIAS = re.compile(r" \[as [^\]]+\]$")


def _parse_javascript(text: str) -> ParsedError | None:
    lines = text.split("\n")
    first_frame = next((i for i, line in enumerate(lines) if _JS_FRAME.match(line)), None)
    if first_frame is None:
        return None
    header = next(
        (line.strip() for line in reversed(lines[:first_frame])
         if _TYPED_MESSAGE.match(line.strip())),
        lines[first_frame - 1].strip() if first_frame else "",
    )
    parsed = parse_message(header)
    frames = []
    for line in lines[first_frame:]:
        match = _JS_FRAME.match(line)
        if not match:
            if line.strip() and not line.strip().startswith("at "):
                break  # the end of this trace: a "[cause]:" or a following log line
            continue
        function, location = (match[1], match[2]) if match[2] else ("<anonymous>", match[3])
        if _JS_LIBRARY.search(location):
            continue
        frames.append(f"{normalise_path(location)}:{_JS_ALIAS.sub('', function)}")
    return ParsedError("javascript", parsed.exception_type, parsed.message, _first_frames(frames))


# --------------------------------------------------------------------------- Go

_GO_PANIC = re.compile(r"^(panic|fatal error): (.*?)(?: \[recovered\])?$", re.MULTILINE)
_GO_GOROUTINE = re.compile(r"^goroutine \d+ \[[^\]]*\]:$", re.MULTILINE)
_GO_FRAME = re.compile(r"^(\S.*?)\((?:[^()]|\([^()]*\))*\)\n\t(\S+\.go):\d+", re.MULTILINE)
# Standard-library packages, by the first element of their import path; a function's own
# frame reads "net/http.(*conn).serve", "sync.(*Once).Do" or "main.main".
_GO_STDLIB_ROOTS = frozenset((
    "archive", "bufio", "builtin", "bytes", "cmp", "compress", "container", "context", "crypto",
    "database", "debug", "embed", "encoding", "errors", "expvar", "flag", "fmt", "go", "hash",
    "html", "image", "index", "internal", "io", "iter", "log", "maps", "math", "mime", "net",
    "os", "path", "plugin", "reflect", "regexp", "runtime", "slices", "sort", "strconv",
    "strings", "sync", "syscall", "testing", "text", "time", "unicode", "unique", "unsafe", "weak",
))
# GOROOT, the module cache, or a -trimpath module path with its version.
_GO_LIBRARY_FILE = re.compile(r"/go/src/|^/usr/(?:local/)?(?:lib/)?go/|/pkg/mod/|@v\d")


def _is_go_library(function: str, path: str) -> bool:
    root = re.split(r"[/.]", function, maxsplit=1)[0]
    return root in _GO_STDLIB_ROOTS or _GO_LIBRARY_FILE.search(path) is not None


def _parse_go(text: str) -> ParsedError | None:
    panic = _GO_PANIC.search(text)
    if panic is None:
        return None
    goroutine = _GO_GOROUTINE.search(text, panic.end())
    dump = text[goroutine.end():] if goroutine else ""
    next_goroutine = _GO_GOROUTINE.search(dump)
    frames = []
    for match in _GO_FRAME.finditer(dump[:next_goroutine.start()] if next_goroutine else dump):
        function, path = match[1], match[2]
        if _is_go_library(function, path):
            continue
        frames.append(f"{normalise_path(path)}:{function.rsplit('/', 1)[-1]}")
    return ParsedError("go", panic[1], panic[2], _first_frames(frames))


# --------------------------------------------------------------------------- Rust

# Since Rust 1.73 the message follows "panicked at src/main.rs:5:9:" on its own lines; before,
# it was quoted inline: "panicked at 'message', src/main.rs:5:9".
_RUST_PANIC_NEW = re.compile(
    r"panicked at ([^\n']+?):\d+:\d+:\n(.*?)(?=\nnote: |\nstack backtrace:|\Z)", re.DOTALL
)
_RUST_PANIC_OLD = re.compile(r"panicked at '(.*?)', ([^\n]+?):\d+:\d+", re.DOTALL)
_RUST_FRAME = re.compile(
    r"^\s*\d+:\s+(?:0x[0-9a-f]+ - )?(\S.*?)(?:::h[0-9a-f]{16})?\s*$"
    r"(?:\n\s+at (\S.*?)(?::\d+)*\s*$)?",
    re.MULTILINE,
)
_RUST_LIBRARY_SYMBOL = re.compile(
    r"^(?:<?(?:std|core|alloc|tokio|futures\w*|hyper|tower|axum|actix\w*|rayon\w*|test|"
    r"backtrace|panic_unwind)::|rust_begin_unwind|__rust|_start|__libc|main$|start_thread|"
    r"clone3?$|<unknown>)"
)
_RUST_LIBRARY_FILE = re.compile(r"^/rustc/|\.cargo/registry|/library/(?:std|core|alloc)/")


def _parse_rust(text: str) -> ParsedError | None:
    new = _RUST_PANIC_NEW.search(text)
    old = None if new else _RUST_PANIC_OLD.search(text)
    if new:
        location, message = new[1], new[2]
    elif old:
        message, location = old[1], old[2]
    else:
        return None
    backtrace = text.split("stack backtrace:", 1)[1] if "stack backtrace:" in text else ""
    frames = [
        f"{normalise_path(path)}:{symbol}" if path else symbol
        for symbol, path in _RUST_FRAME.findall(backtrace)
        if not _RUST_LIBRARY_SYMBOL.match(symbol) and not _RUST_LIBRARY_FILE.search(path)
    ]
    if not frames:
        frames = [normalise_path(location)]
    return ParsedError("rust", "panic", message.strip(), _first_frames(frames))


_TRACE_DIALECTS: tuple[tuple[Callable[[str], bool], Callable[[str], ParsedError | None]], ...] = (
    (lambda text: _PY_TRACEBACK in text, _parse_python),
    (lambda text: "panicked at " in text, _parse_rust),
    (lambda text: _GO_PANIC.search(text) is not None, _parse_go),
    (lambda text: any(_JVM_FRAME.match(line) for line in text.split("\n")), _parse_jvm),
    (lambda text: _JS_ANY_FRAME.search(text) is not None, _parse_javascript),
)
