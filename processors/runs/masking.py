"""Masking: the template of a message, with every variable part replaced by "<*>".

A pure function of one message, so that a template never depends on which other messages were
seen (unlike an online clusterer such as drain3, whose merges depend on arrival order): two
messages share a template exactly when they differ only in variable parts.

Four stages. Multi-part variables first (urls, paths, timestamps, addresses...), since their
parts, masked one by one, would leave separators and month names behind; then every token that
holds a digit; then a number and its unit become one variable; then runs of variables become
one, so that lists of any length give the same template. What each rule buys in grouping
accuracy on Loghub: the table in bench/signature_grouping.py.
"""

from __future__ import annotations

import re
from typing import NamedTuple

WILDCARD = "<*>"

_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*"
_WEEKDAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*"
_CLOCK = r"\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?"
_ZONE = r"(?:\s?(?:Z|[+-]\d{2}:?\d{2}|UTC|GMT|[A-Z]{2,4}T))?"
_TIMESTAMP = (
    rf"(?:\d{{4}}[-/.]\d{{1,2}}[-/.]\d{{1,2}}(?:[T ]{_CLOCK})?{_ZONE}"
    rf"|\d{{1,2}}[-/.]\d{{1,2}}[-/.]\d{{2,4}}(?:[ :]{_CLOCK})?"
    rf"|\d{{1,2}}/{_MONTH}/\d{{4}}(?::{_CLOCK})?{_ZONE}"
    rf"|(?:{_WEEKDAY},?\s+)?{_MONTH}\s+\d{{1,2}}(?:,?\s+\d{{4}})?\s+{_CLOCK}{_ZONE}(?:\s+\d{{4}})?"
    rf"|(?:{_WEEKDAY},?\s+)?\d{{1,2}}\s+{_MONTH}\s+\d{{4}}\s+{_CLOCK}{_ZONE})"
)
_LEVEL = r"(?:TRACE|DEBUG|INFO|NOTICE|WARN(?:ING)?|ERROR|ERR|FATAL|CRIT(?:ICAL)?|SEVERE|[DIWEF])"

# Log noise a logger puts before the message: timestamp, level, pid, [thread], in any order,
# then perhaps a dotted logger name. It only counts as noise when it holds a timestamp or a
# level, so that a message that merely starts with a number or a bracket keeps them.
_LOG_PREFIX = re.compile(
    rf"^(?:(?:\[?{_TIMESTAMP}\]?|\[?{_LEVEL}\]?|\[[^\]]*\]|\(?\d+\)?|---)(?:[\s|]+|:\s+))+"
    r"(?:[\w$]+(?:\.[\w$]+)+\s+[-:]\s+)?"
)
_LOG_PREFIX_EVIDENCE = re.compile(rf"^\[?{_TIMESTAMP}|(?<![\w-]){_LEVEL}(?![\w-])")


class Rule(NamedTuple):
    name: str
    gate: tuple[str, ...]  # the rule can only match where one of these occurs (empty: always)
    pattern: re.Pattern[str]


# Variables made of several parts, applied in this order. The gates skip a regex scan, which
# costs more than a substring test, on the many messages that cannot match.
MULTI_PART_RULES: tuple[Rule, ...] = (
    Rule("url", ("://",), re.compile(r"(?<![\w+.-])[a-zA-Z][\w+.-]*+://\S+")),
    Rule("email", ("@",), re.compile(r"(?<![\w.+-])[\w.+-]++@[\w-]+(?:\.[\w-]+)+")),
    Rule("path", ("/", "\\"), re.compile(
        r"(?<![\w/.])/[\w.@~+%*-]++(?:/[\w.@~+%*-]*)*|\b[A-Za-z]:\\[^\s:*?\"<>|]*")),
    # Only those of several tokens, which all have a clock; a date alone is one token that
    # the digits rule masks.
    Rule("timestamp", (":",), re.compile(rf"(?=[\dA-Z])(?<![\w.:-]){_TIMESTAMP}(?![\w.:/-]?\w)")),
    Rule("ip address", (".",), re.compile(
        r"\d(?<![\w.]\d)\d{0,2}(?:\.\d{1,3}){3}(?::\d+)?\b(?!\.\w)")),
    Rule("host:port, IPv6 or MAC", (":",), re.compile(
        r"(?<![\w.-])[A-Za-z][\w-]*+(?:\.[\w-]++)+:\d{1,5}\b"
        r"|(?<![\w:])(?=[\w:]*\d)(?:[0-9A-Fa-f]{0,4}:){2,}[0-9A-Fa-f]{1,4}\b(?!:)")),
    # Three parts or more (host names, class names), unless the last is an upper-case constant
    # (an enum value, "android.intent.action.SCREEN_ON").
    Rule("dotted name", (".",), re.compile(
        r"[A-Za-z_](?<![\w$.-][A-Za-z_])[\w$-]*+(?:\.[\w$-]+)+\.(?=[\w$-]*[a-z$])[\w$-]+"
        r"(?![\w$-]|\.[\w$])")),
    # A quoted token, or a quoted value after "=", but not a quoted phrase, which may be
    # part of the message's structure ('"GET /servers HTTP/1.1" status: 200').
    Rule("quoted", ('"', "'"), re.compile(r"(?<==)\"[^\"]*\"|\"[^\"\s]*\"|(?<!\w)'[^'\s]*'(?!\w)")),
    Rule("key=value", ("=",), re.compile(
        r"(?<=\w=)[^\s,;&()\[\]{}<>\"']+(?:\{[^{}]*\}|\([^()]*\)|\[[^\[\]]*\])?")),
    # The one word variable common to all kinds of logs: a user name.
    Rule("user name", ("user ",), re.compile(r"(?<=\buser )[^\s,;:()\[\]{}<>]+")),
)

_STOP = r"\s,;:=()\[\]{}<>\"'"
# Dot leaders ("store operation.......0") end a token, like a delimiter does.
_DOT_LEADERS = re.compile(r"\.{2,}(?=[^.\s])")
TOKEN_RULES: tuple[Rule, ...] = (
    # Every token with a digit, but for a device name (eth0, sda1, en0, tty2: a short lower-case
    # word and one digit), which names a part of the machine rather than an instance of data.
    Rule("digits", (), re.compile(
        rf"(?<![^{_STOP}])(?![a-z]{{2,6}}\d(?![^{_STOP}]))[^{_STOP}\d]*+\d[^{_STOP}]*+")),
    # A regex that starts with a character class or a lookahead scans fastest, so the
    # boundary check comes after the first letter: this reads "\b[a-fA-F]{8,}\b".
    Rule("hex", (), re.compile(r"[a-fA-F](?<!\w[a-fA-F])[a-fA-F]{7,}\b")),
    Rule("boolean", (), re.compile(
        r"(?=[tfTFnN])\b(?:true|false|True|False|TRUE|FALSE|null|NULL|None|nil)\b")),
)
_UNIT = re.compile(
    r"[<>~]?<\*>\s?(?:%|(?:[KMGTPE]i?B|B|bytes?|[KMG]?Hz|[mun]?s|secs?|seconds?|mins?|minutes?"
    r"|h|hours?|days?)\b)"
)
# Variables side by side, or glued by punctuation ("<*>:<*>"), and a variable's annotation
# in brackets ("10.0.0.1 (host-1.example.com)", "1190 bytes (1.16 KB)").
_GLUE = r"[:/.\-_|@#]"
_GLUED = rf"<\*>(?:{_GLUE}*<\*>)*"
_RUN = re.compile(rf"<\*>(?:(?:[\s,;]+|{_GLUE}*)<\*>|\s?\((?:{_GLUED})?\)|\s?\[(?:{_GLUED})?\])+")


def strip_log_noise(message: str) -> str:
    """The message without the timestamp, level, pid and [thread] a logger put before it,
    whitespace normalised."""
    message = " ".join(message.split())
    prefix = _LOG_PREFIX.match(message)
    if prefix and _LOG_PREFIX_EVIDENCE.search(prefix[0]):
        return message[prefix.end():]
    return message


def mask(message: str) -> str:
    """The template of one message: variables as "<*>", whitespace normalised."""
    message = strip_log_noise(message)
    for rule in MULTI_PART_RULES:
        if not rule.gate or any(marker in message for marker in rule.gate):
            message = rule.pattern.sub(WILDCARD, message)
    if ".." in message:
        message = _DOT_LEADERS.sub(r"\g<0> ", message)
    for rule in TOKEN_RULES:
        message = rule.pattern.sub(WILDCARD, message)
    if WILDCARD in message:
        message = _RUN.sub(WILDCARD, _UNIT.sub(WILDCARD, message))
    return message
