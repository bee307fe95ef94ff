"""When two memories say the same thing, by rule: the values a text names (numbers,
identifiers, calendar words, names), who says it, whether it asks, what it denies, whether it
says that something changed, and on which day a time-relative text was written. The guard of
clustering, write-time twins, stale facts and the merge's sentence picking all judge by these
rules.

Measured on bench/data/consolidation_eval.jsonl (bench/data/README.md).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass
from datetime import date

from processors.consolidation.candidates import (
    ConsolidationCandidate,
    ConsolidationSettings,
    partition_key,
)
from processors.text.lexical import STOP_WORDS, stem


@dataclass(frozen=True)
class _Anchors:
    """The values a text names, which a restatement keeps and a different fact changes."""

    # Each value with its occurrence ("3" named twice is ("3", 1) and ("3", 2)): "4 facts and
    # the last 3 notes of 3 agents" and "... the last 5 notes of 3 agents" differ in one value
    # although each value of the second is named in the first.
    numbers: frozenset[tuple[str, int]]
    identifiers: frozenset[str]
    # Weekdays, months and times relative to the moment of writing ("last week", "today"):
    # "the backup runs on Mondays" is not "... on Fridays".
    calendar: frozenset[str]


# A number as written in prose: 1,050  0.60  $50k  80%  24-hour. Not inside a word (BM25).
NUMBER_IN_PROSE = re.compile(r"(?<![\w.])(\d+(?:,\d{3})*(?:\.\d+)?)(?:(k)\b|(%)|(?![\w]))", re.I)
# "one" is left out: it is a pronoun as often as a number ("update that one").
NUMBER_WORDS = {
    "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7",
    "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12", "twenty": "20",
    "thirty": "30", "forty": "40", "fifty": "50", "sixty": "60", "seventy": "70",
    "eighty": "80", "ninety": "90",
}
# snake_case, dotted names (auth.py, memory.events), camelCase and PascalCase with an inner
# capital (JWTManager, PendingDiff), letters followed by digits (RS256, int8, Q3).
CODE_IDENTIFIER = re.compile(
    r"\b(?:[A-Za-z][A-Za-z0-9]*(?:[_.][A-Za-z0-9]+)+"
    r"|[a-z]+[A-Z][A-Za-z0-9]*|[A-Z]+[a-z]+[A-Z][A-Za-z0-9]*|[A-Z]{2,}[a-z][A-Za-z0-9]*"
    r"|[A-Za-z]+\d[A-Za-z0-9]*)\b")
# Dotted single letters are prose, not code: e.g, i.e, U.S.
ABBREVIATION = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")
# Weekdays in any case and plural ("on mondays"), months capitalised only: "may" and "march"
# are words too. Abbreviations as in dates ("Mon", "Sept").
WEEKDAY = re.compile(r"\b(mon|tues?|wed(?:nes)?|thu(?:rs?)?|fri|sat(?:ur)?|sun)(?:day)?s?\b",
                      re.I)
MONTH = re.compile(r"\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\b")
# Times that mean nothing without the moment the text was written.
RELATIVE_TIME = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|(?:last|this|next|past) (?:week(?:end)?|month|year"
    r"|night|morning|evening|time|(?:mon|tues|wednes|thurs|fri|satur|sun)day)"
    r"|(?:\w+ )?(?:days?|weeks?|months?|years?) ago|recently|lately|just now)\b", re.I)
MONTH_NAMES = frozenset({
    "jan", "january", "feb", "february", "mar", "march", "apr", "april", "may", "jun", "june",
    "jul", "july", "aug", "august", "sep", "sept", "september", "oct", "october", "nov",
    "november", "dec", "december"})


def anchors_of(text: str) -> _Anchors:
    """The numbers, code identifiers and calendar names a text names, normalised: "ten",
    "10" and "10.0" are one number, "80%" is 0.8, "$50k" is 50000, "Tues" is Tuesday."""
    values: list[str] = []
    for match in NUMBER_IN_PROSE.finditer(text):
        value = float(match.group(1).replace(",", ""))
        if match.group(2):
            value *= 1000
        elif match.group(3):
            value /= 100
        values.append(f"{value:g}")
    values += [NUMBER_WORDS[word] for word in re.findall(r"[a-z]+", text.lower())
               if word in NUMBER_WORDS]
    seen: Counter[str] = Counter()
    numbers: set[tuple[str, int]] = set()
    for named in values:
        seen[named] += 1
        numbers.add((named, seen[named]))
    identifiers = {match.group(0).lower() for match in CODE_IDENTIFIER.finditer(text)
                   if not ABBREVIATION.fullmatch(match.group(0))}
    calendar = {match.group(1).lower()[:3] for match in WEEKDAY.finditer(text)}
    calendar.update(match.group(1).lower() for match in MONTH.finditer(text)
                    if match.group(0).lower() in MONTH_NAMES)
    calendar.update(" ".join(match.group(0).lower().split())
                    for match in RELATIVE_TIME.finditer(text))
    return _Anchors(frozenset(numbers), frozenset(identifiers), frozenset(calendar))


def _conflict(first: _Anchors, second: _Anchors) -> bool:
    """Two texts of which each names a value the other does not state different facts,
    however alike they read: "retries 3 times" is not "retries 5 times", and "service 27
    needs flag 0" is not "service 27 needs flag 8", though both name 27. The embedding model
    puts such pairs at cosine 0.85-0.99, above most true paraphrases. A value named by one
    text alone is a detail added, not a contradiction: "retries 3 times, 10 s apart" restates
    "retries 3 times"."""
    return any(mine - theirs and theirs - mine for mine, theirs in (
        (first.numbers, second.numbers), (first.identifiers, second.identifiers),
        (first.calendar, second.calendar)))


# ---------------------------------------------------------------------------- who and when


@dataclass(frozen=True)
class Traits:
    """What the guard compares beyond the vectors: a memory's values, who says it, whether it
    asks, and on which day it was said when its text only makes sense on that day."""

    anchors: _Anchors
    # The "Name:" a turn of a conversation starts with, lower case; None without one.
    speaker: str | None
    # Content words of what is said (after the speaker's name).
    words: frozenset[str]
    # What it says is so and what it says is not (after the speaker's name).
    polarity: Polarity
    asks: bool
    # The day it was recorded, and whether its text names a time relative to that day.
    day: date
    deictic: bool
    # Whether it says that something changed ("moved to", "took over": `CHANGE_CUE`), or
    # "now" (`NOW_CUE`), and the names it gives (`names_in`).
    says_change: bool
    says_now: bool
    names: frozenset[str]


# "Caroline: ...", "Dr Smith: ...", "agent-7: ...": one to three words before a colon at the
# very start. A longer run is a sentence with a colon in it ("Pin the SDK to 4.2: 4.3 ...").
SPEAKER = re.compile(r"\s*([A-Z][\w'.-]*(?: [A-Z][\w'.-]*){0,2}|[a-z][\w-]*\d[\w-]*):\s+\S")
# A trailing "[shares a photo of ...]" is a description, not what was said.
_TRAILING_BRACKETS = re.compile(r"(?:\s*\[[^\]]*\])+\s*$")


def speaker_of(text: str) -> str | None:
    """Who a memory quotes: its leading "Name:" (lower case), or None."""
    match = SPEAKER.match(text)
    return match.group(1).lower() if match else None


def asks(text: str) -> bool:
    """Whether a text ends by asking: its last sentence is a question. A question inside a
    statement ("Known error? Then retry") does not make one."""
    spoken = sentences(_TRAILING_BRACKETS.sub("", text))
    return bool(spoken) and spoken[-1].endswith("?")


def candidate_traits(candidate: ConsolidationCandidate) -> Traits:
    return traits_of(candidate.text, candidate.created_at.date())


# The write-time twin check compares each new memory with its stored neighbours and its
# batch-mates, so one text meets the guard many times: read again at each meeting, the texts
# took 30% of the worker's event loop with twins on (docs/performance.md). Traits are
# immutable, so a reading is kept.
@functools.lru_cache(maxsize=4096)
def traits_of(text: str, day: date) -> Traits:
    speaker = SPEAKER.match(text)
    said = text[speaker.end(1) + 1:] if speaker else text
    return Traits(
        anchors=anchors_of(text),
        speaker=speaker.group(1).lower() if speaker else None,
        words=frozenset(content_words(said)),
        polarity=polarity(said),
        asks=asks(text),
        day=day,
        deictic=RELATIVE_TIME.search(text) is not None,
        says_change=says_change(said),
        says_now=NOW_CUE.search(said) is not None,
        names=names_in(said),
    )


def restates(first: ConsolidationCandidate, second: ConsolidationCandidate,
             settings: ConsolidationSettings | None = None) -> bool:
    """Whether the guard lets two memories be one fact restated: the same partition, and
    nothing (a value, an opposite, a denial, a speaker, asking or telling, the day, the
    utterance) tells them apart. The vectors decide the rest."""
    settings = settings or ConsolidationSettings()
    return partition_key(first) == partition_key(second) and not distinct(
        candidate_traits(first), candidate_traits(second), settings)


def distinct(first: Traits, second: Traits, settings: ConsolidationSettings) -> bool:
    """Whether two memories cannot be one fact restated, whatever their vectors say: they
    differ in a value, name two opposites, one denies what the other asserts, one says that
    something changed and the other does not (a correction is not what it corrects), they
    give one statement with another name, they differ in who speaks, in asking or telling
    (a question and its answer are neighbours, not duplicates), in the day a time-relative
    text was said, or they are two different utterances of one speaker."""
    return (_conflict(first.anchors, second.anchors)
            or _opposed(first.words, second.words)
            or contradicts(first.polarity, second.polarity, settings.negation_coverage)
            or _change_said(first, second)
            or renamed(first, second)
            or _speakers_differ(first, second)
            or first.asks != second.asks
            or _said_on_different_days(first, second)
            or _different_utterances(first, second, settings.utterance_jaccard))


def _opposed(first: frozenset[str], second: frozenset[str]) -> bool:
    """Each text naming one of a pair of opposites the other does not: "the job runs before
    the deploy" is not "... after the deploy", which the embedding model puts at cosine 0.9
    or more."""
    mine, theirs = first - second, second - first
    return any(OPPOSITE.get(word, frozenset()) & theirs for word in mine)


def _speakers_differ(first: Traits, second: Traits) -> bool:
    """Two speakers' turns are two utterances, however alike: merged, one would lose who said
    it. A memory with no speaker prefix matches one with a prefix only when it names that
    speaker itself ("Caroline said ..."), so that the merged text cannot drop the name; a
    label that the other text names ("Recency: ..." beside "Recency decays ...") is no
    speaker either."""
    if first.speaker == second.speaker:
        return False
    if first.speaker is not None and second.speaker is not None:
        return True
    named, other = (first, second) if first.speaker is not None else (second, first)
    assert named.speaker is not None
    return not content_words(named.speaker) <= other.words


def _different_utterances(first: Traits, second: Traits, jaccard: float) -> bool:
    """Quoted speech records what someone said at one moment. Two turns of one speaker are the
    same memory only when they are one turn recorded twice: said the same day in (nearly) the
    same words. Said on another day, or in other words on one topic, they are two turns, and a
    merge would lose one of them from the dialog."""
    if first.speaker is None or first.speaker != second.speaker:
        return False
    union = first.words | second.words
    shared = len(first.words & second.words) / len(union) if union else 1.0
    return first.day != second.day or shared < jaccard


def _said_on_different_days(first: Traits, second: Traits) -> bool:
    """"I went to the beach yesterday", said in May and again in June, is two outings."""
    return (first.deictic or second.deictic) and first.day != second.day


# ---------------------------------------------------------------------------- changes and names

# Verbs that say a value was replaced, before "to" or "from", an object or a particle
# between: "was upgraded to", "moved the reindex to", "switched over from". Kept to verbs of
# change: "passed" and "handed" are also how code hands a value on ("the token is passed to
# the worker"), so they count only towards a name, a holder ("handed the runbook to Dana").
CHANGE_VERBS = (
    "switched|moved|changed|migrated|upgraded|downgraded|updated|bumped|raised|lowered"
    "|increased|decreased|reduced|extended|shortened|rescheduled|relocated|reassigned"
    "|renamed|reverted|rolled|shifted|rerouted|repointed|rebooked|scaled|transitioned")
# What says that something changed, rather than how it is: a verb of change, "went from", a
# holder handing on ("passed from", "took over the", "stepped down"), a replacement
# ("replaced", "in place of") or a new holder ("is the new owner"). Not "no longer",
# "anymore" or "instead of": the negation rule reads those. A name after "to" or "over" must
# be capitalised (the scoped `(?-i:...)`).
CHANGE_CUE = re.compile(
    rf"\b(?:(?:{CHANGE_VERBS})\b(?:\W+\w+){{0,4}}?\W+(?:over |back |up |down )?"
    r"(?:to|from|onto|into)\b"
    r"|moved off|went (?:up |down )?from"
    r"|(?:handed|passed|transferred|gave|given)\b(?:\W+\w+){0,7}?\W+(?:over |on )?to"
    r" (?-i:[A-Z])"
    r"|passed from|replaced|in place of|stepped down"
    r"|(?:took|taken|takes|take|taking) over"
    r" (?:as |from |by |the |a |an |his |her |their |our |(?-i:[A-Z]))"
    r"|(?:is|are|was|has|have) (?:a |the )?new (?:owner|lead|maintainer|manager|head|contact"
    r"|home|default|location|host|provider|vendor))", re.I)
# Adverbs of the present against the past: a change only in a statement that is otherwise
# the one it changes ("releases are now cut from main" beside "releases are cut from
# develop"). Beside other words they as often say how a thing is ("auth.py line 87 now has
# the corrected logic" restates "Updated the logic in auth.py line 87").
NOW_CUE = re.compile(r"\b(?:now|from now on|going forward|nowadays|previously|formerly)\b",
                     re.I)
# The content words beside NOW_CUE's that each text may have and the other not.
NOW_SPAN = 2


def says_change(text: str) -> bool:
    """Whether a text says that something changed (`CHANGE_CUE`): "the standup moved to
    10:30", "Dana took over the runbook", "the gateway was replaced by Envoy"."""
    return CHANGE_CUE.search(text) is not None


def _change_said(first: Traits, second: Traits) -> bool:
    """Whether one text says that something changed and the other does not: a correction is
    not what it corrects. "Now" (`NOW_CUE`) counts only beside the same statement."""
    said = (_change_level(first), _change_level(second))
    if min(said) > 0 or max(said) == 0:
        return False
    if max(said) == 2:
        return True
    return (len(_mentioned(first.words) - _mentioned(second.words) - _NOW_WORDS) <= NOW_SPAN
            and len(_mentioned(second.words) - _mentioned(first.words) - _NOW_WORDS)
            <= NOW_SPAN)


def _change_level(traits: Traits) -> int:
    return 2 if traits.says_change else 1 if traits.says_now else 0


_NOW_WORDS = frozenset({"now", "from", "on", "going", "forward", "nowadays", "previously",
                        "formerly"})


# A word that starts with a capital, with its possessive (and, to be told from a name, any
# digits, underscores or dotted parts of an identifier: "BM25", "MEMORY_FAIL_OPEN").
_CAPITALISED = re.compile(r"(?<![\w'\u2019.-])[A-Z][\w'\u2019-]*(?:\.\w+)*")


def names_in(text: str) -> frozenset[str]:
    """The names a text gives (lower case): its capitalised words, but function words ("The",
    "We"), weekdays and months (calendar anchors) and code identifiers (identifier anchors),
    a possessive read as its name ("Dana's" is Dana)."""
    return frozenset(name for _, name in name_spans(text))


def name_spans(text: str) -> list[tuple[tuple[int, int], str]]:
    """Where each name of `names_in` lies in the text, with the name."""
    found = []
    for match in _CAPITALISED.finditer(text):
        word = match.group(0).replace("\u2019", "'").removesuffix("'s").strip("'-")
        lower = word.lower()
        if (not word or lower in STOP_WORDS or lower in NEGATION_CUES or lower in MONTH_NAMES
                or WEEKDAY.fullmatch(word) or CODE_IDENTIFIER.fullmatch(word)):
            continue
        found.append(((match.start(), match.start() + len(word)), lower))
    return found


# Content words beside the names that a renamed statement may word otherwise, on each side.
RENAMED_SLACK = 1


def renamed(first: Traits, second: Traits) -> bool:
    """Whether two texts give one statement with another name: each gives a name the other
    does not mention, and beside the names they share their content words (but RENAMED_SLACK
    each). "The checkout service is owned by Renata" is not "... by Jules"; "Sofia speaks
    Portuguese" is not "... Japanese". The embedding model puts such pairs at cosine 0.85 or
    more, and a name is no anchor. Paraphrases that list other named things beside other
    words ("We chose FastAPI ... ruling out Express" / "MyApp will use FastAPI ...") are
    left to the vectors."""
    mine = first.names - second.names - _mentioned(second.words)
    theirs = second.names - first.names - _mentioned(first.words)
    if not (mine and theirs):
        return False
    rest_mine = _mentioned(first.words) - _mentioned(second.words) - mine
    rest_theirs = _mentioned(second.words) - _mentioned(first.words) - theirs
    return len(rest_mine) <= RENAMED_SLACK and len(rest_theirs) <= RENAMED_SLACK


@functools.lru_cache(maxsize=4096)
def _mentioned(words: frozenset[str]) -> frozenset[str]:
    # The guard's words keep a possessive ("dana's"); a name is mentioned by either form.
    return frozenset(word.removesuffix("'s") for word in words)


# ---------------------------------------------------------------------------- negation


@dataclass(frozen=True)
class Polarity:
    """What a text says is so and what it says is not: the content words it affirms and those
    it denies (each a light stem), a word it both affirms and denies left out of both ("the
    VPN is needed for deploys, not for reads" denies reads alone)."""

    asserted: frozenset[str]
    denied: frozenset[str]

    @property
    def words(self) -> frozenset[str]:
        return self.asserted | self.denied


# Where a negation's scope ends: a sentence, or a part of one set off by punctuation or a
# conjunction ("deploys need the VPN, but not the bastion"). "nor" opens a part of its own,
# which it negates: "neither A nor B" denies both.
_CLAUSE_BREAK = re.compile(
    r"[.!?](?:\s|$)|[,;:()\[\]\n]|\s[-\u2013\u2014]+\s"
    r"|\b(?:but|however|although|though|whereas|because|since|so|if|unless|when|while)\b"
    r"|(?=\bnor\b)", re.I)
# Words that deny what follows them in their clause: negations, and absence ("without",
# "missing": "a memory missing a usable vector" is "a memory without a usable vector") and
# cessation ("stopped", "no longer": what was so is so no more). Every "n't" negates too.
NEGATION_CUES = frozenset({
    "not", "no", "never", "none", "nobody", "nothing", "nowhere", "neither", "nor", "cannot",
    "without", "missing", "lack", "lacks", "lacking", "absent", "stopped", "ceased",
})
# Contrasts that deny what follows them: "A instead of B" and "A rather than B" say "A, not B".
_NEGATING_BEFORE = {"instead": "of", "rather": "than"}
# A negation that does not negate before these: "not only", "no matter", and exclusivity,
# which restates "only" ("accepts no other connections", "nothing else is kept"). And the
# word a negation takes along ("no longer", "no more"), which is no content of the clause.
_NOT_NEGATING = {"not": frozenset({"only", "just"}),
                 "no": frozenset({"matter", "doubt", "other"}),
                 "nothing": frozenset({"else"}), "nobody": frozenset({"else"})}
_TAKEN_ALONG = {"no": frozenset({"longer", "more"})}
# Words that only strengthen a negation ("not needed anymore", "not yet enabled").
NEGATION_FILLERS = frozenset({"anymore", "yet", "ever", "either", "any"})


def polarity(text: str) -> Polarity:
    """The affirmed and the denied content words of a text. A negation denies what follows
    it in its clause, not what comes before ("the VPN is no longer needed" denies needed,
    and is still about the VPN); each further negation in the clause flips it back, so a
    double negation affirms ("cannot be rebuilt without downtime" denies rebuilt, affirms
    downtime). Numbers are left out: their differences are the anchors' business."""
    affirmed: set[str] = set()
    negated: set[str] = set()
    for clause in _CLAUSE_BREAK.split(text.lower().replace("\u2019", "'")):
        words = _WORD.findall(clause)
        negations = 0
        for position, word in enumerate(words):
            before = words[position - 1] if position else ""
            after = words[position + 1] if position + 1 < len(words) else ""
            if _negates(word, after):
                negations += 1
            elif not (word in STOP_WORDS or word in NEGATION_FILLERS or word[0].isdigit()
                      or word in _TAKEN_ALONG.get(before, frozenset())):
                # Without a final e, "caches" and "caching" are one word (stem: cache, cach).
                (negated if negations % 2 else affirmed).add(stem(word).rstrip("e"))
    return Polarity(frozenset(affirmed - negated), frozenset(negated - affirmed))


def contradicts(first: Polarity, second: Polarity, coverage: float) -> bool:
    """Whether one text denies what the other asserts: it restates at least `coverage` of
    the other's content words and denies one of those the other asserts ("deploys need the
    VPN" and "deploys go through the bastion; the VPN is no longer needed"), which the
    embedding model puts at cosine 0.8 or more. Two texts that deny a word alike are
    negative statements of one thing ("the job does not run on weekends", "on weekends the
    job does not run"), and a denial of what the other does not say is a detail added
    ("deploys need the VPN, not the bastion" beside "deploys need the VPN")."""
    if first.denied & second.denied:
        return False
    return any(
        denying.denied & asserting.asserted
        and len(denying.words & asserting.words) >= coverage * len(asserting.words)
        for denying, asserting in ((first, second), (second, first)))


def _negates(word: str, following: str) -> bool:
    if word.endswith("n't") or _NEGATING_BEFORE.get(word) == following:
        return True
    return word in NEGATION_CUES and following not in _NOT_NEGATING.get(word, frozenset())



# ---------------------------------------------------------------------------- sentences

SENTENCE_BREAK = re.compile(r"\n+|(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
_WORD = re.compile(r"[a-z0-9]+(?:[_.'][a-z0-9]+)*")
# Function words carry no fact; without them, Jaccard compares what the sentences say.
# Negations stay: "writes are not mandatory" is another fact than "writes are mandatory".
_STOP_WORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "for", "from", "if", "in", "into",
    "is", "it", "its", "may", "must", "of", "on", "or", "so", "than", "that", "the", "then",
    "this", "to", "was", "were", "when", "with",
})


_OPPOSITE_PAIRS = (
    ("before", "after"), ("earlier", "later"), ("early", "late"), ("first", "last"),
    ("enable", "disable"), ("enabled", "disabled"), ("on", "off"), ("up", "down"),
    ("allow", "deny"), ("allowed", "denied"), ("accept", "reject"), ("accepted", "rejected"),
    ("always", "never"), ("increase", "decrease"), ("increased", "decreased"),
    ("higher", "lower"), ("more", "less"), ("most", "least"), ("min", "max"),
    ("minimum", "maximum"), ("open", "closed"), ("start", "stop"), ("started", "stopped"),
    ("true", "false"), ("yes", "no"), ("success", "failure"), ("succeeded", "failed"),
    ("pass", "fail"), ("passed", "failed"), ("add", "remove"), ("added", "removed"),
    ("include", "exclude"), ("included", "excluded"), ("internal", "external"),
    ("public", "private"), ("read", "write"), ("input", "output"), ("old", "new"),
    ("older", "newer"), ("oldest", "newest"), ("left", "right"), ("above", "below"),
    ("inside", "outside"), ("valid", "invalid"), ("required", "optional"),
    ("sync", "async"), ("synchronous", "asynchronous"), ("staging", "production"),
    ("client", "server"), ("upstream", "downstream"), ("inbound", "outbound"),
    ("import", "export"), ("push", "pull"), ("lock", "unlock"), ("like", "dislike"),
    ("love", "hate"), ("buy", "sell"), ("win", "lose"), ("morning", "evening"),
    ("day", "night"), ("summer", "winter"), ("light", "dark"), ("fast", "slow"),
    ("faster", "slower"), ("big", "small"), ("bigger", "smaller"), ("long", "short"),
    ("longer", "shorter"), ("hot", "cold"), ("warm", "cool"), ("happy", "sad"),
)
OPPOSITE: dict[str, frozenset[str]] = {}
for _one, _other in _OPPOSITE_PAIRS:
    OPPOSITE[_one] = OPPOSITE.get(_one, frozenset()) | {_other}
    OPPOSITE[_other] = OPPOSITE.get(_other, frozenset()) | {_one}


def content_words(sentence: str) -> set[str]:
    return {word for word in _WORD.findall(sentence.lower()) if word not in _STOP_WORDS}


def sentences(text: str) -> list[str]:
    """The sentences of a text: split at line breaks and at . ! ? before a capital or digit."""
    return [part.strip() for part in SENTENCE_BREAK.split(text) if part.strip()]


def near_duplicate(first: str, second: str, jaccard: float) -> bool:
    """Whether two sentences state the same fact, by a lexical measure alone: their content
    words overlap (token-set Jaccard >= `jaccard`), both or neither denies something, and
    they name no conflicting anchors. Stricter than the guard's negation rule: a sentence
    dropped from a merge must not take a denial with it ("… the VPN, not the bastion")."""
    first_words, second_words = content_words(first), content_words(second)
    union = first_words | second_words
    if not union or len(first_words & second_words) / len(union) < jaccard:
        return False
    if bool(polarity(first).denied) != bool(polarity(second).denied):
        return False
    return not _conflict(anchors_of(first), anchors_of(second))

