"""Secrets never reach storage: API keys, tokens, passwords and private keys are replaced by a
marker naming what was removed, before a record is stored or embedded."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

# Ordered: a private key block is removed whole before the token rules see its body.
_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private_key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----.*?"
            r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\Z)",
            re.DOTALL,
        ),
    ),
    ("aws_access_key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    (
        "github_token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})\b"),
    ),
    ("openai_key", re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_\-]{20,}")),
    ("slack_token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b")),
    ("stripe_key", re.compile(r"\b[rs]k_(?:live|test)_[0-9A-Za-z]{16,}\b")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}")),
    ("bearer_token", re.compile(r"(?i)(?<=\bbearer )[A-Za-z0-9_\-.=+/]{16,}")),
    # user:password@host in URLs and DSNs: keep the user and host, drop the password.
    ("url_password", re.compile(r"(?<=://)(?P<user>[^:/@\s]+):[^@/\s]+(?=@)")),
    (
        "assigned_secret",
        re.compile(
            # Key parts are bounded ({0,64}): unbounded, a long run of word characters made
            # the search quadratic (1.3 s for 8,000 characters of "a.-").
            r"(?i)(?P<key>\b[\w.\-]{0,64}?(?:password|passwd|pwd|secret|api[_-]?key"
            r"|access[_-]?key|auth[_-]?token|access[_-]?token|client[_-]?secret)[\w.\-]{0,64}"
            r"\b[\"']?\s*[:=]\s*)"
            r"(?P<quote>[\"']?)(?!\[REDACTED:)(?P<value>[^\s\"',;]{4,})"
        ),
    ),
)


@dataclass(frozen=True)
class Redacted:
    text: str
    found: Counter[str] = field(default_factory=Counter)


def redact_secrets(text: str) -> Redacted:
    """Replace every secret in `text` by `[REDACTED:<kind>]` and count what was found."""
    found: Counter[str] = Counter()
    for kind, pattern in _RULES:
        marker = f"[REDACTED:{kind}]"

        def replace(match: re.Match[str], kind: str = kind, marker: str = marker) -> str:
            found[kind] += 1
            groups = match.groupdict()
            if "value" in groups:
                return f"{groups['key']}{groups['quote']}{marker}"
            if "user" in groups:
                return f"{groups['user']}:{marker}"
            return marker

        text = pattern.sub(replace, text)
    return Redacted(text, found)
