"""Error signatures: one stable id per kind of failure, from run.step errors and failed runs.

A signature is the exception type, the masked message template and the top in-application frames
(see processors/runs/stack_traces.py and processors/runs/masking.py). It is a pure function of the
error text, with no state that learns: the same error gives the same id across restarts, workers and
partitions, whatever the arrival order.

    python -m processors.runs.signatures < messages.txt

reads one error message per line and prints one signature id per line, in the same order, so
that grouping can be checked on any corpus (see bench/signature_grouping.py).
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass

from processors.runs.masking import mask
from processors.runs.stack_traces import parse_error


@dataclass(frozen=True)
class ErrorSignature:
    signature_id: str  # "sig_" + 20 hex characters of blake2b over the other four fields
    dialect: str  # one of processors.runs.stack_traces.Dialect
    exception_type: str | None
    template: str  # the message with its variable parts as "<*>"
    frames: tuple[str, ...]  # at most 3 in-app frames, innermost first: "app/models.py:load_user"


def signature_of(error_text: str) -> ErrorSignature:
    """The signature of one error: a message, or a whole stack trace of any known dialect."""
    parsed = parse_error(error_text)
    template = mask(parsed.message)
    # JSON, so that no two different signatures share a key whatever their parts contain.
    key = json.dumps([parsed.dialect, parsed.exception_type, template, parsed.frames],
                     ensure_ascii=False, separators=(",", ":"))
    digest = hashlib.blake2b(key.encode(), digest_size=10).hexdigest()
    return ErrorSignature(f"sig_{digest}", parsed.dialect, parsed.exception_type, template,
                          parsed.frames)


def main() -> int:
    # Lines end at "\n" only (str.splitlines would also split at form feeds and U+2028, and
    # so answer more lines than were asked); bytes that are not UTF-8 must not stop the run.
    text = sys.stdin.buffer.read().decode("utf-8", errors="replace")
    lines = text.split("\n")
    if text.endswith("\n") or not text:
        lines.pop()
    sys.stdout.write("".join(signature_of(line).signature_id + "\n" for line in lines))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
