"""What the optional LLM hook is asked, and which answers are kept.

The hook only rewrites prose; facts, ids and evidence stay deterministic. An answer that is
empty or over budget is refused, and the caller keeps the deterministic text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from memstream_client.redaction import redact_secrets
from processors.runs.digests import DIGEST_TOKEN_CAP, RunDigest
from processors.text.condense import approx_tokens

ChatMessage = dict[str, str]

_DIGEST_SYSTEM = (
    "You rewrite run digests of software agents into clear, compact prose for other agents."
    " Keep every fact, name, error and file exactly; add nothing; keep the headings Outcome,"
    " Key changes, Decisions, Gotchas and Next steps when they have content."
    f" At most {DIGEST_TOKEN_CAP * 3} characters. Answer with the digest only."
)


def digest_rewrite_request(digest: RunDigest) -> list[ChatMessage]:
    return [
        {"role": "system", "content": _DIGEST_SYSTEM},
        {"role": "user", "content": digest.summary_text()},
    ]


# A merged memory is stored as a memory.write would be: at most 8000 characters.
MERGE_TOKEN_CAP = 2000
_MERGE_SYSTEM = (
    "You merge memories of software agents that state the same thing into one memory."
    " Keep every distinct fact, name, number and identifier exactly; add nothing; say each"
    " fact once. Plain prose, no heading. Answer with the merged memory only."
)


def merge_rewrite_request(texts: Sequence[str]) -> list[ChatMessage]:
    """The members' texts, medoid first, one per numbered line."""
    listed = "\n".join(f"{n}. {' '.join(text.split())}" for n, text in enumerate(texts, 1))
    return [
        {"role": "system", "content": _MERGE_SYSTEM},
        {"role": "user", "content": listed},
    ]


# A handoff is stored as a memory.write: at most 8000 characters.
HANDOFF_TOKEN_CAP = 2000
_HANDOFF_SYSTEM = (
    "You rewrite the handoff a software agent leaves for its next session: a summary of what"
    " it did and its next steps. Keep every fact, name, file and identifier exactly; add"
    " nothing; keep the headings Summary and Next steps, the steps as a list, in order."
    " Answer with the handoff only."
)


def handoff_rewrite_request(handoff: str) -> list[ChatMessage]:
    return [
        {"role": "system", "content": _HANDOFF_SYSTEM},
        {"role": "user", "content": handoff},
    ]


_SUMMARY_SYSTEM = (
    "You brief a software agent on what its long-term memory holds about its question, from"
    " the memories given only. Answer the question as the memories do: keep every fact, name"
    " and number exactly; add nothing; say each fact once. Cite each memory by its id in"
    " brackets, as given, and cite every memory given; cite no other id. A memory marked"
    " contested by another is one a newer memory restates with another value, pending review:"
    " say it is contested, and by which. Plain prose, no heading. At most {chars} characters."
    " Answer with the brief only."
)


def summary_rewrite_request(query: str, summary: str, budget_tokens: int) -> list[ChatMessage]:
    """The question and the deterministic summary of the memories found for it
    (processors/recall/summary.py)."""
    return [
        {"role": "system", "content": _SUMMARY_SYSTEM.format(chars=budget_tokens * 3)},
        {"role": "user", "content": f"Question: {query}\n\n{summary}"},
    ]


def accepted_prose(reply: str, cap_tokens: int = DIGEST_TOKEN_CAP) -> str | None:
    """The reply as stored (secrets redacted), or None when it cannot replace the text."""
    text = reply.strip()
    if not text or approx_tokens(text) > cap_tokens:
        return None
    return redact_secrets(text).text


# Entities the hook may add to what the rules found in one record.
MAX_LLM_ENTITIES = 16
_ENTITIES_SYSTEM = (
    "You list the named things a note of a software team mentions: people, teams, projects,"
    " services, tools, libraries, hosts, products, organisations, places. Answer with a JSON"
    " array only, one object per thing: {\"name\": the name exactly as the note writes it,"
    " \"kind\": one lower-case word}. Names the note does not write are wrong; so are"
    f" generic words. At most {MAX_LLM_ENTITIES} objects."
)


def entity_extraction_request(text: str) -> list[ChatMessage]:
    return [
        {"role": "system", "content": _ENTITIES_SYSTEM},
        {"role": "user", "content": text},
    ]


def accepted_entities(reply: str, text: str) -> list[tuple[str, str]] | None:
    """The (name, kind) pairs of the hook's answer that the text itself writes (a name it
    does not write is the model's, not the record's), at most MAX_LLM_ENTITIES; None when the
    answer is not the JSON array asked for."""
    try:
        answer = json.loads(_FENCE.sub("", reply).strip())
    except ValueError:
        return None
    if not isinstance(answer, list):
        return None
    written = " ".join(text.split()).casefold()
    found: list[tuple[str, str]] = []
    for item in answer:
        if not isinstance(item, dict):
            return None
        name, kind = item.get("name"), item.get("kind")
        if not isinstance(name, str) or not isinstance(kind, str):
            return None
        name, kind = " ".join(name.split()), kind.strip().casefold()
        if 0 < len(name) <= 120 and kind.isalpha() and len(kind) <= 30 \
                and name.casefold() in written:
            found.append((name, kind))
    return found[:MAX_LLM_ENTITIES]


# A reply wrapped in a Markdown code fence, as models often answer JSON.
_FENCE = re.compile(r"^\s*```(?:json)?|```\s*$", re.I)
