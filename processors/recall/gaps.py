"""What agents needed and memory did not hold (seed 003's gaps): when a recall met one, what
a gap keeps of its text, which row counts it, and which gaps ask the same question.

A gap is met two ways. Explicitly: an agent says so when it rates what it was given
(`memory.rate`'s `gap`). Implicitly: a recall made for a question over the whole namespace
(a search, a context pack, a summary, a session's wake) showed nothing (`unanswered`).

Each (namespace, agent, source, `gap_key`) is one row, counted each time it is met again:
the key is the text lower-cased with its spacing collapsed, so the same words asked again
are the same gap.

Rows that ask the same question in other words are one group, by two rules:

- at write, the same content terms (`terms_key`: the set of stemmed words that are not stop
  words, as the lexical signal of search reads them): "What port does the metrics exporter
  listen on?" and "metrics exporter listening port" share a group at once, without the
  model;
- then the keeper (streams/reads/gap_keeper.py) embeds each new group's first question and
  folds it into the nearest older group whose first question lies at a cosine of at least
  the similarity model's `same_question` (processors/text/calibration.py) from it ("where are
  the TLS certificates stored" and "location of the TLS certs": 0.82 with MiniLM).

The threshold is measured (`python -m bench.gap_grouping`, bench/data/gap_questions.jsonl):
25 pairs of a question and its paraphrase, and 25 pairs of a question and a different
question of the same shape that changes one thing ("deploy the billing service to staging"
/ "... to production"). all-MiniLM-L6-v2 (int8) puts paraphrases at 0.52-0.96 and the different
questions at 0.28-0.89 (medians 0.82 and 0.59): no threshold parts them. 0.73 is the one
where grouped paraphrases minus wrongly grouped questions peaks (21 of 25 grouped, 3 of 25
wrongly: deploy to staging / to production, EU / US customers' data, where / who wrote the
design doc); questions of other subjects stay far below (at most 0.35 among the 25
subjects). The content-terms rule alone groups 1 of these 25 paraphrases (they reword) and
none of the different questions: it is for the same question asked again with other
inflections and filler. A wrong fold costs readability only: the group lists every question
it holds, and each row is resolved on its own (a group is resolved once all its rows are).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from memstream_client.redaction import redact_secrets
from processors.text.lexical import terms

# A recall's parameters that narrow what it looks at: with any of them, an empty answer may
# be the filter's, not memory's.
FILTERS = frozenset({"kind", "memory_type", "tag", "tier", "review_state", "related_id",
                     "since", "until"})


def narrows(given: Iterable[str]) -> bool:
    """Whether the parameters `given` to a recall narrow it with one of `FILTERS`."""
    return not FILTERS.isdisjoint(given)


def unanswered(query: str, min_score: float, shown: int, answer_floor: float,
               narrowed: bool) -> bool:
    """Whether a recall met a gap: it asked a question (a search by related ids alone asks
    none), over the whole namespace (not `narrowed` by a filter: `narrows`), looked at least
    as far down as `answer_floor` (search's default minimum score: what a later memory must
    reach to resolve the gap), and showed nothing. A recall that asked for more than the
    floor and found nothing does not say that memory holds nothing at the floor; one that
    asked for less and was shown weak hits was given something."""
    return bool(query.strip()) and not narrowed and min_score <= answer_floor and shown == 0


def kept_text(text: str) -> str:
    """What a gap keeps of a question: the text with its secrets redacted, as every memory
    is, since a gap's text is stored and shown back."""
    return redact_secrets(text).text


def gap_key(text: str) -> str:
    """The row of a gap: the same words, in other case or spacing, count in one row."""
    return _digest(" ".join(text.lower().split()))


def terms_key(text: str) -> str:
    """The group a gap joins at write: its stemmed content terms, as a set (order,
    inflection, case and stop words aside); a text of stop words alone is its own words."""
    content = sorted(set(terms(text)))
    return _digest(" ".join(content) if content else "words:" + " ".join(text.lower().split()))


def _digest(basis: str) -> str:
    return hashlib.sha256(basis.encode()).hexdigest()[:32]
