"""The lexical signal of hybrid search: BM25 as sparse vectors, computed here and nowhere else,
so that every index backend and the Postgres fallback rank words alike.

A record's document is its title and text, the wordings of the writes folded into it as its
restatements (write-time twins: a term counts as often as the wording that names it most, so
that a restated memory is found by the words only a restatement holds and not weighed up by
its repetitions), the memories before it in its thread at lower weights (its context: 0.5 for
the one just before, 0.25 for the one before that), and tokens for the day, month and year it
occurred. Words are lower-cased `\\w+` tokens, stop words
(NLTK's English list) dropped and suffixes stemmed lightly (`stem`). Each term becomes a
dimension (`term_id`, a stable hash) whose value is BM25's saturated term frequency, with a
fixed average document length, so that the same record always gets the same vector and an
index can be rebuilt from the records. A query's vector holds one IDF weight per term (dates
written in it become date tokens at their precision), from the namespace's document
frequencies: the dot product of the two is the record's BM25 score.

The choices were measured one at a time on the development conversations (docs/retrieval.md):
k1 0.6 and b 0.2 (short, similar-length memories), the context window, the date tokens, the
stop list and the stemmer each pay.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from schemas.records import Record

# BM25's parameters (k1: how fast a term's weight saturates; b: how much length matters).
K1 = 0.6
B = 0.2
# Terms of a typical memory with its context; fixed so that a record's vector never depends
# on the others (with b = 0.2 a stale average moves scores by less than 1%).
AVERAGE_LENGTH = 20.0
# The weights of the memories before a memory in its thread, nearest first, against 1 for
# its own terms: the context helps find the record, the record comes first.
CONTEXT_WEIGHTS = (0.5, 0.25)
# Term ids are hashes below this bound (pgvector's sparsevec takes up to 10^9 dimensions).
TERM_SPACE = 1 << 29

_WORD = re.compile(r"\w+")

# NLTK's English stop words (179, no dependency on nltk).
STOP_WORDS = frozenset("""
i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself
yourselves he him his himself she she's her hers herself it it's its itself they them their
theirs themselves what which who whom this that that'll these those am is are was were be been
being have has had having do does did doing a an the and but if or because as until while of
at by for with about against between into through during before after above below to from up
down in out on off over under again further then once here there when where why how all any
both each few more most other some such no nor not only own same so than too very s t can will
just don don't should should've now d ll m o re ve y ain aren aren't couldn couldn't didn
didn't doesn doesn't hadn hadn't hasn hasn't haven haven't isn isn't ma mightn mightn't mustn
mustn't needn needn't shan shan't shouldn shouldn't wasn wasn't weren weren't won won't wouldn
wouldn't
""".split())  # noqa: SIM905  # a list of words reads best as words

_VOWELS = frozenset("aeiou")


def tokens(text: str) -> list[str]:
    """Lower-cased words and numbers (an apostrophe splits: "caroline's" -> caroline, s)."""
    return _WORD.findall(text.lower())


@lru_cache(maxsize=100_000)
def stem(word: str) -> str:
    """A light stemmer: plurals folded (Harman's S rules), then -ing, -ed and -ly cut, with
    doubled consonants and silent e's repaired (running -> run, hiked -> hike, painting ->
    paint). Within 0.002 of Porter2 on the evaluation, without its rules on names."""
    if len(word) <= 3 or word.isdigit():
        return word
    word = _plural(word)
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            root = word[: -len(suffix)]
            if not _VOWELS & set(root):
                return word
            if len(root) >= 2 and root[-1] == root[-2] and root[-1] not in "lsz":
                return root[:-1]
            if (len(root) <= 4 and root[-1] not in _VOWELS and root[-1] not in "wxy"
                    and root[-2] in _VOWELS and root[-3] not in _VOWELS):
                return root + "e"
            return root
    if word.endswith("ly") and len(word) >= 6:
        return word[:-2]
    return word


def _plural(word: str) -> str:
    if word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]
    if word.endswith("s") and not word.endswith(("us", "ss")):
        return word[:-1]
    return word


def terms(text: str) -> list[str]:
    """The terms of a text, in order, stop words left out."""
    return [stem(word) for word in tokens(text) if word not in STOP_WORDS]


_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december")
_MONTH_NUMBER = {name: number for number, name in enumerate(_MONTHS, 1)}
_MONTH = "(" + "|".join(_MONTHS) + ")"
# Dates as questions write them, most precise first: a span is read once, by its most
# precise form.
_QUERY_DATES = (
    (re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)? " + _MONTH + r",? (\d{4})\b"), "dmy"),
    (re.compile(r"\b" + _MONTH + r" (\d{1,2})(?:st|nd|rd|th)?,? (\d{4})\b"), "mdy"),
    (re.compile(r"\b" + _MONTH + r",? (\d{4})\b"), "my"),
    (re.compile(r"\b(?:in|during|of|since|until|before|after) " + _MONTH + r"\b"), "m"),
    (re.compile(r"\b(?:in|during|of|since|until|before|after) ((?:19|20)\d\d)\b"), "y"),
)


def date_terms(moment: datetime) -> list[str]:
    """The date tokens of when a record occurred: its day, its month, the month of any year,
    its year."""
    y, m, d = moment.year, moment.month, moment.day
    return [f"__d{y}_{m:02d}_{d:02d}", f"__m{y}_{m:02d}", f"__mon{m:02d}", f"__y{y}"]


def query_date_terms(query: str) -> list[str]:
    """The date tokens of the dates written in a query, at the precision written."""
    text = query.lower()
    found: list[str] = []
    spans: list[tuple[int, int]] = []
    for pattern, form in _QUERY_DATES:
        for match in pattern.finditer(text):
            if any(match.start() < end and match.end() > start for start, end in spans):
                continue
            spans.append((match.start(), match.end()))
            g = match.groups()
            if form == "dmy":
                y, m, d = g[2], _MONTH_NUMBER[g[1]], int(g[0])
                found += [f"__d{y}_{m:02d}_{d:02d}", f"__m{y}_{m:02d}"]
            elif form == "mdy":
                y, m, d = g[2], _MONTH_NUMBER[g[0]], int(g[1])
                found += [f"__d{y}_{m:02d}_{d:02d}", f"__m{y}_{m:02d}"]
            elif form == "my":
                found.append(f"__m{g[1]}_{_MONTH_NUMBER[g[0]]:02d}")
            elif form == "m":
                found.append(f"__mon{_MONTH_NUMBER[g[0]]:02d}")
            else:
                found.append(f"__y{g[0]}")
    return found


# Terms recur (a vocabulary is Zipfian), and ranking a search's candidates asks for the ids of
# thousands of them: a cached id costs a tenth of its hash.
@lru_cache(maxsize=100_000)
def term_id(term: str) -> int:
    """A term's dimension: the same in every process and after every restart."""
    digest = hashlib.blake2b(term.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % TERM_SPACE


@dataclass(frozen=True)
class SparseVector:
    """Dimensions in ascending order, with their values."""

    indices: tuple[int, ...]
    values: tuple[float, ...]

    @classmethod
    def of(cls, weights: Mapping[int, float]) -> SparseVector:
        ordered = sorted(weights.items())
        return cls(tuple(i for i, _ in ordered), tuple(v for _, v in ordered))

    def __bool__(self) -> bool:
        return bool(self.indices)

    def weights(self) -> dict[int, float]:
        """Its values by dimension."""
        return dict(zip(self.indices, self.values, strict=True))

    def dot(self, other: SparseVector) -> float:
        theirs = other.weights()
        return sum(value * theirs.get(index, 0.0)
                   for index, value in zip(self.indices, self.values, strict=True))


# The vector of a text without terms (all stop words, or empty).
NO_TERMS = SparseVector((), ())


def document_vector(text: str, title: str | None = None, contexts: Sequence[str] = (),
                    occurred_at: datetime | None = None,
                    restatements: Sequence[str] = ()) -> SparseVector:
    """A record's lexical vector: BM25's saturated frequency of each term of its title and
    text and of its restatements (each term as often as the wording that names it most), of
    its contexts at CONTEXT_WEIGHTS, and of its date tokens (which do not count in its
    length)."""
    weighted: dict[str, float] = dict(_own_counts(text, title, restatements))
    for context, weight in zip(contexts, CONTEXT_WEIGHTS, strict=False):
        for term in terms(context):
            weighted[term] = weighted.get(term, 0.0) + weight
    length = sum(weighted.values())
    if occurred_at is not None:
        for term in date_terms(occurred_at):
            weighted[term] = weighted.get(term, 0.0) + 1.0
    if not weighted:
        return NO_TERMS
    norm = K1 * (1 - B + B * length / AVERAGE_LENGTH)
    by_id: dict[int, float] = {}
    for term, frequency in weighted.items():
        index = term_id(term)
        by_id[index] = by_id.get(index, 0.0) + frequency
    return SparseVector.of({index: tf * (K1 + 1) / (tf + norm) for index, tf in by_id.items()})


def term_presence(text: str, title: str | None = None, contexts: Sequence[str] = (),
                  occurred_at: datetime | None = None,
                  restatements: Sequence[str] = ()) -> dict[int, float]:
    """How fully a record holds each of its terms, by term id: 1 for a term of its own title,
    text, restatements or date, a context's weight (CONTEXT_WEIGHTS) for a term only its
    context holds."""
    held: dict[int, float] = {}
    for context, weight in zip(contexts, CONTEXT_WEIGHTS, strict=False):
        for term in terms(context):
            index = term_id(term)
            held[index] = max(held.get(index, 0.0), weight)
    own = _own_counts(text, title, restatements)
    for term in [*own, *(date_terms(occurred_at) if occurred_at is not None else ())]:
        held[term_id(term)] = 1.0
    return held


def _own_counts(text: str, title: str | None, restatements: Sequence[str]) -> Counter[str]:
    """The terms a record words itself, each counted as often as the wording that names it
    most: its title and text, and each restatement (one fact in other words, which adds its
    words but repeats the fact's)."""
    counts = Counter(terms(f"{title}\n{text}" if title else text))
    for restatement in restatements:
        counts |= Counter(terms(restatement))
    return counts


def coverage(term_ids: Sequence[int], held: Mapping[int, float],
             frequencies: Mapping[int, int], documents: int) -> float:
    """The share of a query's information that a record holds, in [0, 1]: each query term
    weighs its IDF in the namespace (a term no record holds weighs the most, so a query about
    something the namespace never mentions is covered little), and counts as fully as the
    record holds it (`term_presence`). Unlike a BM25 score it does not fall with the
    record's length, nor depend on the other candidates: a long memory that holds the
    query's one rare word covers it fully."""
    weights = [(idf(documents, frequencies.get(index, 0)), held.get(index, 0.0))
               for index in term_ids]
    total = sum(weight for weight, _ in weights)
    if total <= 0:
        return 0.0
    return sum(weight * share for weight, share in weights) / total


def context_texts(body: Mapping[str, Any]) -> list[str]:
    """The contexts a record's body keeps (processors.memory.writes.with_context), nearest
    first."""
    contexts = body.get("context")
    if not isinstance(contexts, list):
        return []
    return [c["text"] for c in contexts if isinstance(c, Mapping) and isinstance(c.get("text"),
                                                                                  str)]


def restatement_texts(body: Mapping[str, Any]) -> list[str]:
    """The texts of the writes folded into a record as its restatements
    (processors.memory.lifecycle.restated), oldest first."""
    restatements = body.get("restatements")
    if not isinstance(restatements, list):
        return []
    return [entry["text"] for entry in restatements
            if isinstance(entry, Mapping) and isinstance(entry.get("text"), str)]


def record_vector(record: Record) -> SparseVector:
    """A record's lexical vector: its title and text, its restatements, its contexts, its
    date."""
    return _record_vector(record.text, record.title, tuple(context_texts(record.body)),
                          record.created_at, tuple(restatement_texts(record.body)))


# A new record's vector is asked for three times (its row, its first version, its index
# point), each a tokenizing of its texts; vectors are immutable, so a recent one is kept.
@lru_cache(maxsize=1024)
def _record_vector(text: str, title: str | None, contexts: tuple[str, ...],
                   created_at: datetime, restatements: tuple[str, ...]) -> SparseVector:
    return document_vector(text, title, contexts, created_at, restatements)


def record_presence(record: Record) -> SparseVector:
    """How fully a record holds each of its terms (`term_presence`), kept with it so that a
    search reads it instead of tokenizing every candidate's texts again."""
    return SparseVector.of(term_presence(record.text, record.title, context_texts(record.body),
                                         record.created_at, restatement_texts(record.body)))


def query_term_ids(query: str) -> list[int]:
    """The distinct term ids of a query, dates included, in order."""
    return list(dict.fromkeys(term_id(term)
                              for term in [*terms(query), *query_date_terms(query)]))


def idf(documents: int, frequency: int) -> float:
    """BM25's inverse document frequency (never negative)."""
    return math.log(1 + (documents - frequency + 0.5) / (frequency + 0.5))


def query_vector(term_ids: Iterable[int], frequencies: Mapping[int, int],
                 documents: int) -> SparseVector:
    """A query's lexical vector: the IDF of each of its terms in the namespace. A term no
    record holds cannot match and is left out."""
    return SparseVector.of({
        index: idf(documents, frequencies[index])
        for index in term_ids if frequencies.get(index, 0) > 0
    })
