"""The lexical signal of hybrid search: BM25 as sparse vectors, computed here and nowhere else,
so that every index backend and the Postgres fallback rank words alike.

A record's document is its title, its text and, at a lower weight, its context (the memory
before it in its thread). Words are lower-cased, stop words dropped and suffixes stemmed
(`stem`); each term becomes a dimension (`term_id`, a stable hash) whose value is BM25's
saturated term frequency, with a fixed average document length, so that the same record
always gets the same vector and an index can be rebuilt from the records. A query's vector
holds one IDF weight per term, from the namespace's document frequencies: the dot product of
the two is the record's BM25 score.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from schemas.records import Record

# BM25's parameters (k1: how fast a term's weight saturates; b: how much length matters).
K1 = 1.2
B = 0.75
# Tokens of a typical memory; fixed so that a record's vector never depends on the others.
AVERAGE_LENGTH = 24.0
# The weight of a term of the context (the memory before it in its thread), against 1 for a
# term of the record itself: the context helps find the record, the record comes first.
CONTEXT_WEIGHT = 0.5
# Term ids are hashes below this bound (pgvector's sparsevec takes up to 10^9 dimensions).
TERM_SPACE = 1 << 29

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")

STOP_WORDS = frozenset([
    "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are",
    "aren", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both",
    "but", "by", "can", "cannot", "could", "couldn", "did", "didn", "do", "does", "doesn",
    "doing", "don", "down", "during", "each", "few", "for", "from", "further", "had", "hadn",
    "has", "hasn", "have", "haven", "having", "he", "her", "here", "hers", "herself", "him",
    "himself", "his", "how", "i", "if", "in", "into", "is", "isn", "it", "its", "itself",
    "just", "let", "me", "more", "most", "mustn", "my", "myself", "no", "nor", "not", "now",
    "of", "off", "on", "once", "only", "or", "other", "ought", "our", "ours", "ourselves",
    "out", "over", "own", "same", "shan", "she", "should", "shouldn", "so", "some", "such",
    "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these",
    "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was",
    "wasn", "we", "were", "weren", "what", "when", "where", "which", "while", "who", "whom",
    "why", "will", "with", "won", "would", "wouldn", "you", "your", "yours", "yourself",
    "yourselves", "also", "yes", "oh", "hey", "hi", "hello", "yeah", "okay", "ok", "really",
    "just", "got", "get", "gets", "getting", "like", "lot", "lots", "thing", "things", "much",
])


def tokens(text: str) -> list[str]:
    """Lower-cased words and numbers, possessives and contractions cut off."""
    return [word.split("'")[0] for word in _WORD.findall(text.lower())]


def stem(word: str) -> str:
    """A light suffix stemmer: enough to match "painting", "paints" and "painted" with
    "paint", and "studies" with "study", without Porter's rules (and mistakes) on names."""
    if len(word) <= 3 or word.isdigit():
        return word
    for suffix, replacement in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            stemmed = word[: len(word) - len(suffix)] + replacement
            # "running" -> "runn" -> "run"; "stopped" -> "stopp" -> "stop"
            if len(stemmed) > 3 and stemmed[-1] == stemmed[-2] and stemmed[-1] not in "lsz":
                stemmed = stemmed[:-1]
            return stemmed
    return word


_SUFFIXES = (
    ("ies", "y"), ("ied", "y"), ("ing", ""), ("edly", ""), ("ed", ""), ("ness", ""),
    ("ments", "ment"), ("ly", ""), ("es", "e"), ("s", ""),
)


def terms(text: str) -> list[str]:
    """The terms of a text, in order, stop words left out."""
    return [stem(word) for word in tokens(text) if word not in STOP_WORDS]


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

    def dot(self, other: SparseVector) -> float:
        theirs = dict(zip(other.indices, other.values, strict=True))
        return sum(value * theirs.get(index, 0.0)
                   for index, value in zip(self.indices, self.values, strict=True))


# The vector of a text without terms (all stop words, or empty).
NO_TERMS = SparseVector((), ())


def document_vector(text: str, title: str | None = None,
                    context: str | None = None) -> SparseVector:
    """A record's lexical vector: BM25's saturated frequency of each term."""
    counts: Counter[str] = Counter(terms(f"{title}\n{text}" if title else text))
    weighted: dict[str, float] = dict(counts)
    if context:
        for term, count in Counter(terms(context)).items():
            weighted[term] = weighted.get(term, 0.0) + CONTEXT_WEIGHT * count
    length = sum(weighted.values())
    if not length:
        return NO_TERMS
    norm = K1 * (1 - B + B * length / AVERAGE_LENGTH)
    by_id: dict[int, float] = {}
    for term, frequency in weighted.items():
        index = term_id(term)
        by_id[index] = by_id.get(index, 0.0) + frequency
    return SparseVector.of({index: tf * (K1 + 1) / (tf + norm) for index, tf in by_id.items()})


def context_text(body: Mapping[str, Any]) -> str | None:
    """The context a record's body keeps (processors.memories.with_context), if any."""
    context = body.get("context")
    text = context.get("text") if isinstance(context, Mapping) else None
    return text if isinstance(text, str) else None


def record_vector(record: Record) -> SparseVector:
    """A record's lexical vector: its title and text, and its context if it has one."""
    return document_vector(record.text, record.title, context_text(record.body))


def query_term_ids(query: str) -> list[int]:
    """The distinct term ids of a query, in order."""
    return list(dict.fromkeys(term_id(term) for term in terms(query)))


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
