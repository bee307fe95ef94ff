"""Facts that go stale: a new memory that restates a live one of its partition with a different
value makes the older one no longer true, and it is invalidated (valid_until = the newer's
occurred_at) rather than left to be recalled beside its correction.

The consolidation guard (processors/consolidation/restatements.py) already tells "the same statement
with a differing value or an opposite" from a restatement: its anchors (numbers, identifiers,
calendar names), its opposites and its denial rule. Here the same signals decide the other way
round, with three more demands, because a false invalidation hides a true fact while a missed one
only leaves a stale fact beside its correction:

- both memories are standing facts: no question, no quoted turn of a conversation ("Name:
  ..."), which records what was said at a moment and stays true of that moment, and no time
  relative to the writing ("yesterday", "last week"), which makes the text an event of its
  day, not a state that a later text can replace;
- the conflict is of the right kind: a value, an opposite or a denial; or the newer says that
  something changed ("now", "was upgraded to", "passed from A to B", "took over",
  "replaced A with B": restatements.CHANGE_CUE) with one short span replaced; or the holder of
  a role only one holds is another name ("the owner is Priya" / "... Marco", "Pavel owns the
  design system" / "Maren owns ..."); not only another speaker or day, and not a name alone
  in a relation of many ("Priya speaks Portuguese" / "... Japanese" both hold);
- the rest of the statement agrees (`_changed_part`): what the older text says that the newer
  does not is the changed value and nothing else, so that a different subject ("the EU
  cluster has 3 nodes" / "the US cluster has 5 nodes") is not read as a new value. A change
  statement words the rest its own way, which is allowed for: the value it says was replaced
  ("from Alice to Bob") is what the older held, the verb a change cue stands in for ("the
  cluster runs" / "... was upgraded to") is no part, and a noun made of a verb is the verb
  ("ownership" / "owns").

Measured on bench/data/invalidation_eval.jsonl (`python -m bench.invalidation_eval`): see
bench/data/README.md for the figures.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Literal

from processors.consolidation.candidates import (
    ConsolidationCandidate,
    ConsolidationSettings,
    partition_key,
)
from processors.consolidation.restatements import (
    ABBREVIATION,
    CHANGE_VERBS,
    CODE_IDENTIFIER,
    MONTH,
    MONTH_NAMES,
    NEGATION_CUES,
    NEGATION_FILLERS,
    NOW_CUE,
    NUMBER_IN_PROSE,
    NUMBER_WORDS,
    OPPOSITE,
    RELATIVE_TIME,
    SENTENCE_BREAK,
    WEEKDAY,
    Polarity,
    anchors_of,
    asks,
    content_words,
    contradicts,
    name_spans,
    polarity,
    says_change,
    speaker_of,
)
from processors.text.calibration import DEFAULT_CALIBRATION
from processors.text.lexical import STOP_WORDS, stem

Because = Literal["value", "opposite", "denial", "change_cue", "holder"]

# Words other than the value that the changed part may lose beside it: its unit or qualifier
# ("after 30 minutes" -> "after 12 hours"), when the newer part is a value and at most as
# many other words too. On dev (issue 37's set, at MiniLM's stale cosine): 0 recall 0.859 against
# 0.871; 2 lets other facts through as a value with its "unit" (precision 0.962: "the Redis
# instance for sessions has 4 GB" / "... for the job queue has 16 GB", "the staging cluster
# has 3 nodes" / "... runs Kubernetes 1.29").
UNIT_WORDS = 1
# Content words a change cue may replace ("Slack" -> "Microsoft Teams", "lives in Berlin" ->
# "moved to Lisbon"). On dev (issue 37's set, at MiniLM's stale cosine): 1 recall 0.812, 2: 0.871 at
# precision 1.0, 3 or 4 no more recall and precision 0.987, because "now" beside a longer
# replaced part is as often another fact about the subject.
CUE_SPAN = 2
# Words of the older text a change cue stands in for where it stands: its verb ("the cluster
# runs" -> "the cluster was upgraded to"). On dev: 0 recall 0.859, 1 or 2: 0.871.
CUE_VERB = 1
# The guard's share of the other's words that a denial must restate (`contradicts`).
NEGATION_COVERAGE = ConsolidationSettings().negation_coverage

# What the comparison of the rest leaves out: the words that say something changed rather
# than what ("moved", "now", "took over"; restatements.CHANGE_CUE and NOW_CUE), and "no
# longer", "instead of" ("no longer needed" beside "needed" is a denial, nothing lost).
_CUE_WORDS = re.compile(
    rf"\b(?:{CHANGE_VERBS}|now|no longer|instead of|in place of|replaced|from now on"
    r"|going forward|nowadays|previously|formerly|handed|passed|transferred|gave|given"
    r"|(?:took|taken|takes|take|taking) over|stepped down|went)\b", re.I)
# The guard's words (consolidation._WORD), found in the text with their places.
_TOKEN = re.compile(r"[a-z0-9]+(?:[_.'][a-z0-9]+)*", re.I)
_NUMBER_WORD = re.compile(r"\b(?:" + "|".join(NUMBER_WORDS) + r")\b", re.I)
# Words that say which thing a statement is about, not what state it is in: an environment
# ("deploys to staging need the VPN" and "deploys to production need the VPN" both hold),
# an age ("the old API ..." / "the new API ..."). The guard keeps such statements apart (two
# facts are no duplicates); here, one that names another of them is about another subject,
# and changes no value of this one.
_WHICH_ONE = (
    frozenset({"dev", "development", "test", "testing", "qa", "staging", "stage", "preprod",
               "production", "prod", "sandbox", "local"}),
    frozenset({"old", "new", "older", "newer", "oldest", "newest", "legacy", "current"}),
)
# Suffixes that make a noun of a verb (`_stem`).
_DERIVED = ("ership", "ship", "ment", "ion", "er", "or", "al")


def _stem(word: str) -> str:
    """A word's light stem, and of a noun made of a verb its verb ("owner", "ownership" and
    "owns" are "own"; "management" and "manages" "manag"): a restatement may word the
    role by either."""
    root = stem(word.removesuffix("'s"))
    for suffix in _DERIVED:
        if root.endswith(suffix) and len(root) - len(suffix) >= 3:
            root = root[:-len(suffix)]
            break
    return root.rstrip("e") if len(root) > 3 else root


# The guard's opposites but those, also between light stems: "likes" / "dislikes",
# "internally" / "externally" are the pairs "like" / "dislike" and "internal" / "external".
_STEMMED_OPPOSITE: dict[str, frozenset[str]] = {}
for _word, _all_others in OPPOSITE.items():
    _others = frozenset(other for other in _all_others
                        if not any({_word, other} <= family for family in _WHICH_ONE))
    _STEMMED_OPPOSITE[_stem(_word)] = (_STEMMED_OPPOSITE.get(_stem(_word), frozenset())
                                       | {_stem(other) for other in _others})

# A number after a noun that counts things off, or after "#": it says which thing.
_NUMBERED = re.compile(
    r"(?:\b(?:note|number|no|item|step|part|phase|stage|section|chapter|task|issue|ticket|case"
    r"|option|rule|question|point|page|sprint|iteration|round|attempt|milestone|epic|story|bug"
    r"|incident|pr|slide|figure)\.?\s*#?\s*|#)(\d+)\b")

Category = Literal["numbers", "identifiers", "calendar"]
_CATEGORIES: tuple[Category, ...] = ("numbers", "identifiers", "calendar")


@dataclass(frozen=True)
class Invalidation:
    """`older_id` is stale from the moment `newer_id` occurred: they say one thing with
    another value."""

    older_id: str
    newer_id: str
    cosine: float
    # What differs: a value (number, identifier, weekday, month), an opposite, a denial, or a
    # part the newer text says was changed ("now", "switched to", ...).
    because: Because
    # Human-readable, the older part then the newer: "4.2 -> 4.4", "enabled -> disabled".
    detail: str


def invalidation_of(newer: ConsolidationCandidate, older: ConsolidationCandidate,
                    cosine: float,
                    threshold: float = DEFAULT_CALIBRATION.stale) -> Invalidation | None:
    """Whether `newer` makes `older` stale: the same partition, `newer` no older, the two at
    `cosine` >= `threshold`, both standing facts, and the same statement with a changed
    value (module docstring)."""
    if (newer.record_id == older.record_id or partition_key(newer) != partition_key(older)
            or newer.created_at < older.created_at or cosine < threshold
            or not (standing(newer.text) and standing(older.text))):
        return None
    change = changed(older.text, newer.text)
    if change is None:
        return None
    because, detail = change
    return Invalidation(older.record_id, newer.record_id, cosine, because, detail)


def stale_among(newer: ConsolidationCandidate,
                neighbours: Sequence[tuple[ConsolidationCandidate, float]],
                threshold: float = DEFAULT_CALIBRATION.stale) -> list[Invalidation]:
    """Every neighbour (candidate, cosine) that `newer` makes stale, the closest first (ties
    by record id), each once (at its highest cosine): the same whatever order they come in."""
    found: dict[str, Invalidation] = {}
    for older, cosine in neighbours:
        stale = invalidation_of(newer, older, cosine, threshold)
        if stale is not None and (stale.older_id not in found
                                  or _rank(stale) > _rank(found[stale.older_id])):
            found[stale.older_id] = stale
    return sorted(found.values(), key=lambda stale: (-stale.cosine, stale.older_id))


def _rank(stale: Invalidation) -> tuple[float, str, str]:
    # A record met twice at one cosine (a batch's write and its stored copy) must not be
    # judged by whichever came first.
    return stale.cosine, stale.because, stale.detail


def may_invalidate(newer: ConsolidationCandidate) -> bool:
    """Whether `newer` can make any memory stale, whatever its neighbours: whether it is a
    standing fact. False spares the search for neighbours of most writes of a conversation
    (its quoted turns and questions); never False where `invalidation_of` could find
    something."""
    return standing(newer.text)


def standing(text: str) -> bool:
    """Whether a text states a standing fact that a later one can replace: it asks nothing,
    quotes no speaker (a turn records what was said then, which stays true of then) and
    names no time relative to its writing (an event of its day, not a state)."""
    return not asks(text) and speaker_of(text) is None and RELATIVE_TIME.search(text) is None


def changed(older: str, newer: str) -> tuple[Because, str] | None:
    """What `newer` changes in `older`, if it is the same statement with another value: why
    and a readable detail. Order and time play no part here (see `invalidation_of`).

    The guard's conflicts name what may differ: the values of one anchor category of which
    each text names one the other lacks (two categories at once, "memory.events has 12" /
    "memory.dead_letters has 3", is one the subject, the other its value), a pair of
    opposites, or a denial. Then the rest must agree: the older text's content words (NLTK's
    stop words, negations and change cues aside; light stems) that the newer lacks are
    located with difflib, and they must lie in one changed part and be values, save a unit
    beside a value whose replacement is a value and a unit too (`_changed_part`,
    `_only_values`), within one sentence (a part across two is a fact lost beside the value
    changed: "... port 8080. It has 4 replicas" -> "... port 8081"). Words that the newer
    text only adds are details ("... listens on port 8081 behind the proxy").
    Without a conflict, a change cue in the newer text (one the older does not say) stands
    for one when the older lost one part of at most CUE_SPAN words, replaced by something
    ("CI runs on Jenkins" -> "CI moved to GitHub Actions"; "Alice owns the billing service" ->
    "Billing service ownership passed from Alice to Bob", where the value changed from is
    read as the older's and "ownership" as "owns"). A name replaced by a name, with no cue,
    is a change only in a role one holds (`_holds_role`).
    """
    if _another_one(older, newer) or _another_numbered(older, newer):
        return None
    old_tokens, new_tokens = _tokens(older), _tokens(newer)
    old_anchors, new_anchors = anchors_of(older), anchors_of(newer)
    conflicting = [category for category in _CATEGORIES if _differs(
        getattr(old_anchors, category), getattr(new_anchors, category))]
    old_names, new_names = _names_lacking(older, newer), _names_lacking(newer, older)
    renamed = bool(old_names) and bool(new_names)
    opposites = _opposites(older, newer)
    old_polarity, new_polarity = polarity(older), polarity(newer)
    denied = contradicts(old_polarity, new_polarity, NEGATION_COVERAGE)
    if len(conflicting) + renamed + len({mine for mine, _ in opposites}) > 1:
        # Two values changed at once: one of them names another subject ("enabled in
        # staging" / "disabled in production"; "memory.events has 12" / "memory.dead_letters
        # has 3"; "Alice's team has 6 engineers" / "Bob's team has 8").
        return None
    cue = _cue_added(older, newer)
    part = _changed_part(old_tokens, new_tokens, _cue_gaps(newer, new_tokens) if cue else ())
    if part is None or _across_sentences(older, part.old):
        return None
    if conflicting or opposites or denied:
        old_values = _value_stems(older, old_tokens, conflicting) | {
            _stem(mine) for mine, _ in opposites}
        new_values = _value_stems(newer, new_tokens, conflicting) | {
            _stem(theirs) for _, theirs in opposites}
        if not _only_values(part, old_values, new_values):
            # More than the value changed, unless a cue says what ("Jonas now leads the team
            # instead of Elena": the denial of Elena drops her from the newer text).
            return _cue_change(older, newer, part) if cue else None
        if conflicting and (part.old or part.new):
            return "value", part.detail(older, newer)
        if conflicting:
            # The words are the same, their counts not ("the last 3 notes" of "3 facts and
            # the last 3 notes" became 5): the anchors say which values changed.
            return "value", _values_changed(
                getattr(old_anchors, conflicting[0]), getattr(new_anchors, conflicting[0]))
        if opposites:
            return "opposite", ", ".join(f"{mine} -> {theirs}" for mine, theirs in opposites)
        return "denial", _denial_detail(older, old_polarity, new_polarity)
    if renamed and not cue:
        # A name is no value of most relations ("Priya speaks Portuguese" / "... Japanese"
        # both hold): only of one that a single holder fills.
        if _only_values(part, old_names, new_names) and part.old \
                and _holds_role(older, part.old) and _holds_role(newer, part.new):
            return "holder", part.detail(older, newer)
        return None
    return _cue_change(older, newer, part) if cue else None


def _cue_change(older: str, newer: str, part: _Part) -> tuple[Because, str] | None:
    """A change the newer text says happened: the older lost one part of at most CUE_SPAN
    words, replaced by something. A change of what a negative statement denies is another
    negative statement, no change."""
    if polarity(older).denied or not part.old or len(part.old) > CUE_SPAN or not part.new:
        return None
    return "change_cue", part.detail(older, newer)


def _values_changed(older: frozenset[object], newer: frozenset[object]) -> str:
    """"3 -> 5": the values of one anchor category each side names and the other does not (a
    counted number as its value alone)."""
    def named(values: frozenset[object]) -> str:
        return ", ".join(sorted({str(value[0] if isinstance(value, tuple) else value)
                                 for value in values}))

    return f"{named(older - newer)} -> {named(newer - older)}"


def _another_numbered(older: str, newer: str) -> bool:
    """Whether the texts name two numbered things ("note 1" / "note 2", "sprint 12" / "sprint
    13", "#41" / "#42"): a number that names which one is the subject's, not a value of it."""
    mine, theirs = set(_NUMBERED.findall(older.lower())), set(_NUMBERED.findall(newer.lower()))
    return bool(mine - theirs and theirs - mine)


def _another_one(older: str, newer: str) -> bool:
    """Whether each text names a thing of one `_WHICH_ONE` family the other does not
    ("staging" / "production"): two subjects."""
    mine, theirs = content_words(older), content_words(newer)
    return any(family & (mine - theirs) and family & (theirs - mine) for family in _WHICH_ONE)


def _names_lacking(text: str, other: str) -> frozenset[str]:
    """The light stems of the names `text` gives (restatements.names_in) that `other` does
    not mention, in any case, nor `text` gives as a value it changed from ("from Priya to
    Marco"): a holder's name the newer text adds or drops. A name of several words
    ("Two-factor") is mentioned when each of its words is."""
    theirs = {token.stem for token in _tokens(other)}
    mine = _tokens(text)
    replaced = _replaced_spans(text)
    lacking: set[str] = set()
    for span, _ in name_spans(text):
        if _inside(span, replaced):
            continue
        words = {token.stem for token in mine if _inside((token.start, token.end), [span])}
        if not words <= theirs:
            lacking |= words
    return frozenset(lacking)


def _says_change(text: str) -> bool:
    return says_change(text) or NOW_CUE.search(text) is not None


def _cue_added(older: str, newer: str) -> bool:
    """Whether the newer text says that something changed and the older does not say so in
    the same words: "moved to" beside "moved to" says nothing new ("failed messages are moved
    to the DLQ" / "... to the retry topic" are two facts)."""
    if not _says_change(newer):
        return False
    if not _says_change(older):
        return True
    return bool(_cue_words(newer) - _cue_words(older))


def _cue_words(text: str) -> set[str]:
    return {" ".join(match.group(0).lower().split()) for match in _CUE_WORDS.finditer(text)}


# Where a change statement names the value it changed from: "from A to B", "replaced A with
# B", "B replaced A", "B instead of A", "B took over ... from A", "A handed ... to B". That
# value is no longer held: in the older text it is history, not a value the newer must keep;
# in the newer, it is what the older held.
_REPLACED = (
    re.compile(r"\bfrom ((?:[#@]?[\w.'-]+ ){0,3}?[#@]?[\w.'-]+) (?:to|onto|into)\b", re.I),
    re.compile(r"\breplaced ((?:[#@]?[\w.'-]+ ){0,3}?[#@]?[\w.'-]+) (?:with|by)\b", re.I),
    re.compile(r"\breplaced ((?-i:[A-Z])[\w'-]*(?: (?-i:[A-Z])[\w'-]*)*)", re.I),
    # A channel or a handle keeps its sign: "instead of #ops-alerts".
    re.compile(r"\b(?:instead of|in place of|rather than) ([#@]?[\w.' -]*[\w.'])", re.I),
    re.compile(r"\b(?:took|taken|takes|take|taking) over\b[^.;,]*?\bfrom ([\w.' -]*[\w.'])",
               re.I),
    re.compile(r"((?-i:[A-Z])[\w'-]*) (?:handed|passed|transferred|gave)\b", re.I),
)
# The most words a value changed from spans.
_REPLACED_WORDS = 4


@functools.lru_cache(maxsize=4096)
def _replaced_spans(text: str) -> tuple[tuple[int, int], ...]:
    """Where the text names a value it says was replaced (`_REPLACED`)."""
    spans = []
    for pattern in _REPLACED:
        for match in pattern.finditer(text):
            value = match.group(1)
            end = match.start(1) + len(value)
            words = list(_TOKEN.finditer(text, match.start(1), end))[:_REPLACED_WORDS]
            if words:
                spans.append((words[0].start(), words[-1].end()))
    return tuple(spans)


# Who fills a role only one holds at a time: the name after "owned by", "the owner ... is",
# "is in" (where one is), or before "owns", "leads", "is the maintainer".
_ROLES = (r"owner|lead|maintainer|manager|head|chair|contact|dri|commander|champion|captain"
          r"|approver|assignee|steward|coordinator|administrator|admin|on-?call")
_HOLDER_BEFORE = re.compile(
    r"(?:\b(?:owned|led|maintained|managed|run|headed|chaired|approved|handled|coordinated"
    r"|administered|assigned to) by"
    rf"|\b(?:{_ROLES})\b[^.;]{{0,60}}?\b(?:is|was|:)"
    r"|\b(?:is|are|lives|live|based|located|hosted|sits|sit|headquartered) in(?: the)?)"
    r"\s*$", re.I)
_HOLDER_AFTER = re.compile(
    r"\s*(?:owns|leads|maintains|manages|runs|heads|chairs|approves|handles|coordinates"
    rf"|administers|(?:is|was) (?:the|our) (?:[\w-]+ ){{0,3}}?(?:{_ROLES}))\b", re.I)


def _holds_role(text: str, tokens: Sequence[_Token]) -> bool:
    """Whether the words fill a role of one holder in the text (`_HOLDER_BEFORE`,
    `_HOLDER_AFTER`): "The design system is owned by Pavel", "Farah leads the team"."""
    return bool(tokens) and (_HOLDER_BEFORE.search(text, 0, tokens[0].start) is not None
                             or _HOLDER_AFTER.match(text, tokens[-1].end) is not None)


def _cue_gaps(text: str, tokens: Sequence[_Token]) -> frozenset[int]:
    """The places between the text's content words (before the word at each index, or at
    the end) where a change cue stands: "... cluster [was upgraded to] Elasticsearch ..."."""
    cues = [match.span() for match in _CUE_WORDS.finditer(text)]
    bounds = [0, *(token.end for token in tokens)]
    ends = [*(token.start for token in tokens), len(text)]
    return frozenset(index for index, (start, end) in enumerate(zip(bounds, ends, strict=True))
                     if _inside((start, end), cues))


# ---------------------------------------------------------------------------- the rest agrees


@dataclass(frozen=True)
class _Token:
    """A content word of a text: its light stem, and where it lies in the text."""

    stem: str
    start: int
    end: int
    # Written with a capital: a name, never the verb a change cue stands in for.
    capital: bool = False


@dataclass(frozen=True)
class _Part:
    """What changed: the older text's words that the newer lacks (all in one place), and the
    newer's words that took their place (or, when the older's were dropped there, every word
    the newer adds)."""

    old: tuple[_Token, ...]
    new: tuple[_Token, ...]

    def detail(self, older: str, newer: str) -> str:
        return f"{_quoted(older, self.old)} -> {_quoted(newer, self.new)}"


# A text is read several times per comparison (its changed part, its names) and meets each
# of its neighbours: a reading is kept.
@functools.lru_cache(maxsize=4096)
def _tokens(text: str) -> tuple[_Token, ...]:
    """The content words of a text in order: NLTK's stop words, negations (a denial is the
    polarity rule's business), the words of a change cue and a value said to be replaced
    (`_REPLACED`) left out, "Dana's" read as "Dana"."""
    text = text.replace("\u2019", "'")
    skipped = [*(match.span() for match in _CUE_WORDS.finditer(text)), *_replaced_spans(text)]
    found = []
    for match in _TOKEN.finditer(text):
        word = match.group(0).lower()
        if (word in STOP_WORDS or word in NEGATION_CUES or word in NEGATION_FILLERS
                or word.endswith("n't") or _inside(match.span(), skipped)):
            continue
        found.append(_Token(_stem(word), match.start(), match.end(),
                            match.group(0)[0].isupper()))
    return tuple(found)


def _changed_part(old_tokens: Sequence[_Token], new_tokens: Sequence[_Token],
                  cue_gaps: Collection[int] = ()) -> _Part | None:
    """Where the older text's content differs from the newer's, if in one place; None when
    in two or more.

    A word of the older text is lost when the newer does not have it anywhere (a word that
    moved is kept: "port 8080 is where the orders service listens"). difflib's opcodes group
    the lost words into parts; two parts are two changes, as in "the EU cluster has 3 nodes"
    / "the US cluster has 5 nodes", where one of them names another subject. No lost word at
    all is an empty part: a denial or an opposite adds its words and loses none. A lone word
    dropped where the newer text says a change (`cue_gaps`: "runs" of "the cluster runs
    Elasticsearch 7.17" where "... was upgraded to Elasticsearch 8.13" stands) is the verb
    the cue took the place of, not a part.
    """
    old_stems = [token.stem for token in old_tokens]
    new_stems = [token.stem for token in new_tokens]
    lost = set(old_stems) - set(new_stems)
    parts: list[tuple[int, _Part]] = []
    opcodes = SequenceMatcher(None, old_stems, new_stems, autojunk=False).get_opcodes()
    for at, (tag, i1, i2, j1, j2) in enumerate(opcodes):
        gone = tuple(token for token in old_tokens[i1:i2] if token.stem in lost)
        if tag == "delete" and j1 in cue_gaps and len(gone) <= CUE_VERB \
                and not any(token.capital or token.stem[0].isdigit() for token in gone):
            continue
        if tag in ("replace", "delete") and gone:
            parts.append((at, _Part(gone, tuple(new_tokens[j1:j2]))))
    if len(parts) > 1:
        return None
    if not parts:
        return _Part((), ())
    at, part = parts[0]
    if _narrowed(opcodes[:at], new_tokens, set(old_stems)):
        return None
    if not part.new:
        # Dropped here and said elsewhere ("Slack" -> "switched to Microsoft Teams for chat"):
        # the new side is what the newer text adds.
        added = set(new_stems) - set(old_stems)
        part = _Part(part.old, tuple(token for token in new_tokens if token.stem in added))
    return part


def _narrowed(before: Sequence[tuple[str, int, int, int, int]], new_tokens: Sequence[_Token],
              old_stems: Collection[str]) -> bool:
    """Whether the newer text qualifies the phrase that leads to the change with a word of
    its own: "the admin API rate limit is 20" beside "the API rate limit is 100" speaks of
    another limit. `before`: the opcodes up to the changed part. The word is a common one
    (a name or a number there is the new value said first: "Ewa replaced Ramon as ...",
    "Seven engineers share ..."), and the phrase it qualifies is two words or more kept
    as they were, up to the change (one word between is a verb or a preposition of a
    paraphrase: "We keep logs for 90 days")."""
    if len(before) < 2:
        return False
    (tag, _, _, j1, j2), (last, i1, i2, _, _) = before[-2], before[-1]
    added = [token for token in new_tokens[j1:j2] if token.stem not in old_stems]
    return (tag == "insert" and last == "equal" and i2 - i1 >= 2 and bool(added)
            and not any(token.capital or token.stem[0].isdigit()
                        or _NUMBER_WORD.fullmatch(token.stem) for token in added))


def _only_values(part: _Part, old_values: frozenset[str], new_values: frozenset[str]) -> bool:
    """Whether the older text lost values alone (`old_values`), save UNIT_WORDS others beside
    a value whose replacement is a value and as many others: "after 30 minutes" -> "after 12
    hours", not "has 3 nodes" -> "runs Kubernetes 1.29"."""
    others = [token for token in part.old if token.stem not in old_values]
    if not others:
        return True
    replacing = [token for token in part.new if token.stem not in new_values]
    holds_value = (any(token.stem in old_values for token in part.old)
                   and any(token.stem in new_values for token in part.new))
    # A unit is a common word: a name beside a value is the thing it counts ("React 18" /
    # "TypeScript 5" are two things a frontend uses, not one thing's new version).
    return holds_value and len(others) <= UNIT_WORDS and len(replacing) <= UNIT_WORDS \
        and not any(token.capital for token in (*others, *replacing))


def _across_sentences(text: str, tokens: Sequence[_Token]) -> bool:
    """Whether the words lie in more than one sentence of the text (the guard's breaks)."""
    return bool(tokens) and SENTENCE_BREAK.search(text, tokens[0].end, tokens[-1].start) \
        is not None


def _value_stems(text: str, tokens: Sequence[_Token],
                 categories: Sequence[Category]) -> frozenset[str]:
    """The stems of the words that name a value of `categories` in a text: those overlapping
    the guard's numbers, identifiers or calendar names."""
    spans = [span for category in categories for span in _anchor_spans(text, category)]
    return frozenset(token.stem for token in tokens if _inside((token.start, token.end), spans))


def _anchor_spans(text: str, category: Category) -> list[tuple[int, int]]:
    """Where the guard's anchors of one category lie in a text (consolidation.anchors_of)."""
    if category == "numbers":
        return ([match.span(1) for match in NUMBER_IN_PROSE.finditer(text)]
                + [match.span() for match in _NUMBER_WORD.finditer(text)])
    if category == "identifiers":
        return [match.span() for match in CODE_IDENTIFIER.finditer(text)
                if not ABBREVIATION.fullmatch(match.group(0))]
    return ([match.span(1) for match in WEEKDAY.finditer(text)]
            + [match.span() for match in MONTH.finditer(text)
               if match.group(0).lower() in MONTH_NAMES])


def _differs(mine: frozenset[object], theirs: frozenset[object]) -> bool:
    """The guard's anchor conflict (consolidation._conflict) within one category: each names
    a value the other does not. A value named by one alone is a detail added."""
    return bool(mine - theirs) and bool(theirs - mine)


def _opposites(older: str, newer: str) -> list[tuple[str, str]]:
    """The guard's opposites (consolidation._opposed), also between light stems: each word
    of the older text whose opposite the newer names instead, with that word, as written
    (lower case), sorted."""
    old_words = {_stem(word): word for word in sorted(content_words(older))}
    new_words = {_stem(word): word for word in sorted(content_words(newer))}
    return sorted(
        (old_words[mine], new_words[theirs]) for mine in old_words.keys() - new_words.keys()
        for theirs in _STEMMED_OPPOSITE.get(mine, frozenset()) & (
            new_words.keys() - old_words.keys()))


def _denial_detail(older: str, old_polarity: Polarity, new_polarity: Polarity) -> str:
    """"now denied: need office VPN" (or "now affirmed: ..." when the older text denied)."""
    now_denied = new_polarity.denied & old_polarity.asserted
    flipped = now_denied or (old_polarity.denied & new_polarity.asserted)
    words = [match.group(0) for match in _TOKEN.finditer(older)
             if stem(match.group(0).lower()).rstrip("e") in flipped]
    return f"now {'denied' if now_denied else 'affirmed'}: {' '.join(dict.fromkeys(words))}"


def _quoted(text: str, tokens: Sequence[_Token]) -> str:
    """The text from a part's first word to its last."""
    if not tokens:
        return "(nothing)"
    return text[tokens[0].start:tokens[-1].end]


def _inside(span: tuple[int, int], spans: Sequence[tuple[int, int]]) -> bool:
    start, end = span
    return any(start < other_end and other_start < end for other_start, other_end in spans)
