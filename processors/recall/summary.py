"""A memory-grounded summary of search hits (seed 000's `subagent_memory_search`): what a
sub-agent reads instead of the records whole, within a token budget, deterministic.

The summary is a header line, then one line per memory in rank order: its id in brackets, a
mark when it is contested (a correction of it waits for a reviewer:
processors/recall/contested.py, "(contested by mem_…, pending review)"), its title, and its
sentences most relevant to the query (at most `MAX_SENTENCES`, shown in the
memory's own order). A sentence's relevance is the share of the query's terms it holds
(processors/text/lexical.py `coverage`), each term weighed by how rare it is among the hits, so
that the sentences that tell the hits apart come first; a memory none of whose sentences holds
a query term (a hit found by meaning alone) shows its first sentence.

Lines are added while the whole summary fits in the budget, as counted by the caller's
tokenizer (the model's, as the context pack counts): a memory that does not fit with all its
sentences is shown with fewer, then with its best sentence cut to the words that fit; when
not even `MIN_WORDS` of it fit, the summary stops there, so that what it shows is always the
best hits, in order.

The LLM hook may rewrite it (`grounded_rewrite`): the rewrite must fit the same budget, name
every memory id the summary names (those it shows, and the corrections of the contested ones
among them), and name no other.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from memstream_client.redaction import redact_secrets
from processors.recall.contested import Contest, summary_mark
from processors.text.condense import sentences
from processors.text.lexical import coverage, query_term_ids, term_id, term_presence, terms

# The fewest tokens a summary may be given: its header and one memory's id and a few words.
MIN_BUDGET_TOKENS = 32
# Sentences of one memory a summary shows at most.
MAX_SENTENCES = 2
# A memory cut to fewer words than this says nothing: the summary stops instead.
MIN_WORDS = 4
# The query as the header quotes it, at most.
QUERY_SHOWN_CHARS = 80
# A record id as client/memstream_client/ids.py and consolidation make them.
RECORD_ID = re.compile(r"\b(?:mem|dig|fix)_[0-9a-f]{24}\b")

# The tokens of a text, as the reader's model counts them.
TokenCount = Callable[[str], int]


@dataclass(frozen=True)
class SummaryHit:
    """A search hit as a summary reads it."""

    record_id: str
    title: str | None
    text: str
    # The correction of it that waits for a reviewer.
    contested: Contest | None = None


@dataclass(frozen=True)
class Summary:
    text: str
    # The memories the summary shows, in rank order.
    memory_ids: tuple[str, ...]
    tokens: int
    # The contests of the memories it shows, in their order.
    contested: tuple[Contest, ...] = ()

    @property
    def named_ids(self) -> set[str]:
        """Every memory id the text names: those it shows and their corrections."""
        return {*self.memory_ids, *(contest.newer for contest in self.contested)}


def summarize(query: str, hits: Sequence[SummaryHit], budget_tokens: int,
              count_tokens: TokenCount) -> Summary:
    """The summary of `hits` (best first) for `query`, in at most `budget_tokens`."""
    if budget_tokens < MIN_BUDGET_TOKENS:
        raise ValueError(f"budget_tokens must be >= {MIN_BUDGET_TOKENS}, got {budget_tokens}")
    if not hits:
        return _fitting([nothing_found(query), "Memory holds nothing relevant to this query."],
                        budget_tokens, count_tokens)
    lines = [_fitting([header(query), "What memory holds, most relevant first (ids in "
                       "brackets):"], budget_tokens, count_tokens).text]
    shown: list[SummaryHit] = []
    weights = _term_weights(query, hits)
    for hit in hits:
        best = _best_sentences(hit, weights)
        line = _fitting_line(hit, best, lines, budget_tokens, count_tokens)
        if line is None:
            break
        lines.append(line)
        shown.append(hit)
    text = "\n".join(lines)
    return Summary(text, tuple(hit.record_id for hit in shown), count_tokens(text),
                   tuple(hit.contested for hit in shown if hit.contested is not None))


def header(query: str) -> str:
    return f"What memory holds about {_quoted(query)}, most relevant first (ids in brackets):"


def nothing_found(query: str) -> str:
    return f"Memory holds nothing relevant to {_quoted(query)}."


def grounded_rewrite(reply: str, summary: Summary, budget_tokens: int,
                     count_tokens: TokenCount) -> str | None:
    """The hook's rewrite of `summary` as answered (secrets redacted), or None when it cannot
    replace it: empty, over the budget, not grounded (a memory id of the summary missing, or
    an id the summary does not name), or silent on a contest the summary shows (it would
    serve a contested fact as the equal of its correction)."""
    text = reply.strip()
    if not text or count_tokens(text) > budget_tokens:
        return None
    if set(RECORD_ID.findall(text)) != summary.named_ids:
        return None
    if summary.contested and "contested" not in text.lower():
        return None
    return redact_secrets(text).text


@dataclass(frozen=True)
class _Weights:
    term_ids: list[int]
    frequencies: dict[int, int]
    documents: int


def _term_weights(query: str, hits: Sequence[SummaryHit]) -> _Weights:
    """The query's terms, and in how many hits each occurs (their IDF among the hits)."""
    term_ids = query_term_ids(query)
    held = [{term_id(term) for term in terms(f"{hit.title or ''}\n{hit.text}")} for hit in hits]
    return _Weights(term_ids, {index: sum(index in ids for ids in held) for index in term_ids},
                    len(hits))


def _best_sentences(hit: SummaryHit, weights: _Weights) -> list[str]:
    """The sentences of the hit to show, most relevant first: at most MAX_SENTENCES of
    those that hold a query term, each shown with the gap before it marked; its first
    sentence when none holds one."""
    found = sentences(hit.text)
    relevance = [coverage(weights.term_ids, term_presence(sentence), weights.frequencies,
                          weights.documents) for sentence in found]
    ranked = sorted(range(len(found)), key=lambda i: (-relevance[i], i))
    return [found[i] for i in [i for i in ranked[:MAX_SENTENCES] if relevance[i] > 0]
            or ranked[:1]]


def _fitting_line(hit: SummaryHit, best: list[str], lines: list[str], budget_tokens: int,
                  count_tokens: TokenCount) -> str | None:
    """The hit's line with as many of its best sentences as fit after `lines`, else its best
    sentence cut to the words that fit, else None."""

    def fits(line: str) -> bool:
        return count_tokens("\n".join([*lines, line])) <= budget_tokens

    for kept in range(len(best), 0, -1):
        line = _line(hit, _in_text_order(hit.text, best[:kept]))
        if fits(line):
            return line
    words = best[0].split() if best else []
    # The most words of the best sentence that fit (fewer words never cost more tokens).
    low, high = MIN_WORDS - 1, len(words) - 1
    while low < high:
        middle = (low + high + 1) // 2
        if fits(_line(hit, " ".join(words[:middle]) + " …")):
            low = middle
        else:
            high = middle - 1
    return _line(hit, " ".join(words[:low]) + " …") if low >= MIN_WORDS else None


def _in_text_order(text: str, chosen: list[str]) -> str:
    """The chosen sentences in the memory's order, a gap between two marked by an
    ellipsis."""
    found = sentences(text)
    positions = sorted(found.index(sentence) for sentence in dict.fromkeys(chosen))
    parts = [found[positions[0]]]
    for before, at in pairwise(positions):
        parts.append(("… " if at > before + 1 else "") + found[at])
    return " ".join(parts)


def _line(hit: SummaryHit, said: str) -> str:
    title = " ".join(hit.title.split()) if hit.title else ""
    mark = "" if hit.contested is None else summary_mark(hit.contested) + " "
    return f"- [{hit.record_id}] {mark}" + (f"{title}: {said}" if title and said
                                             else title or said)


def _fitting(choices: list[str], budget_tokens: int, count_tokens: TokenCount) -> Summary:
    """The first of `choices` that fits the budget, else the last (the shortest)."""
    text = next((c for c in choices if count_tokens(c) <= budget_tokens), choices[-1])
    return Summary(text, (), count_tokens(text))


def _quoted(query: str) -> str:
    shown = " ".join(query.split())
    if len(shown) > QUERY_SHOWN_CHARS:
        shown = shown[:QUERY_SHOWN_CHARS].rsplit(" ", 1)[0] + " …"
    return f'"{shown}"'
