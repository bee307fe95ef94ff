"""Entities without an LLM: what a record names (a wiki-link, a typed tag, a speaker, its agent,
a proper noun, a code identifier, a service, a host, a URL, a version), under one key per
entity, and the relationships its sentences state between them.

Every rule is deterministic and cheap (about 0.2 ms for a 300-character memory), so that it
can run on every write; an LLM may later add what these rules miss. The rules are
conservative: a missed entity costs a graph edge, a wrong one pollutes every recall that
walks it. Recognisers run strongest first, and each claims the characters it read, so a
weaker one never reads a stronger one's match again ("db-1.internal" is a host, not code).

Fenced code blocks are skipped whole: their identifiers are mostly local variables, and a long
fence would crowd the prose's entities out of the per-record cap. Inline `code` is prose.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, cast, get_args

from memstream_client.events import MemoryType
from memstream_client.links import WIKI_LINK
from processors.consolidation.restatements import (
    ABBREVIATION,
    CODE_IDENTIFIER,
    MONTH_NAMES,
    SPEAKER,
)
from processors.text.lexical import STOP_WORDS
from schemas.records import Record

# Strongest evidence first: an entity seen several ways takes the kind and source of the
# strongest (a `project:myapp` tag outranks "MyApp" read as code).
Source = Literal["wiki_link", "typed_title", "tag", "speaker", "agent", "url", "host",
                 "service", "version", "code", "proper_noun", "llm"]
# The kinds these rules give. A typed wiki-link's prefix is a kind even when not listed here
# ([[Runbook: Deploys]] is a runbook), which is why `Mention.kind` is a str.
EntityKind = Literal["project", "person", "service", "team", "tool", "library", "repo", "host",
                     "concept", "org", "product", "agent", "url", "code", "version", "name"]
RelationName = Literal["uses", "depends_on", "replaces", "calls", "runs_on", "part_of", "owns",
                       "links_to", "co_mentioned"]
Origin = Literal["pattern", "wiki_link", "co_mention", "llm"]

MAX_MENTIONS = 64
MAX_NAME_CHARS = 120
PATTERN_CONFIDENCE = 0.9
# "X uses Y and depends on Z": Z's subject is inferred across the conjunction.
COORDINATED_CONFIDENCE = 0.8
# Co-mention never reaches what one explicit sentence says.
MAX_CO_MENTION_CONFIDENCE = 0.8

_STRENGTH = {source: rank for rank, source in enumerate(get_args(Source))}
# Prefixes a tag may type: facet tags (`env:prod`, `priority:high`) are attributes, not things.
_TYPED_KINDS = frozenset(get_args(EntityKind)[:12])
# Mentions that carry no relation of their own: versions and URLs belong to the entity they
# qualify, and the agent is the record's author, not something it talks about.
NOT_CO_MENTIONED: frozenset[Source] = frozenset({"version", "url", "agent"})
_NOT_VERSIONED = frozenset({"person", "agent", "team", "url", "host", "version"})


@dataclass(frozen=True)
class Mention:
    key: str
    # The display form: the wiki-link's target, else the first capitalised form seen.
    name: str
    kind: str
    source: Source
    # The distinct surface forms this text names it by.
    aliases: tuple[str, ...]


@dataclass(frozen=True)
class Relation:
    source: str
    target: str
    relation: RelationName
    confidence: float
    evidence: str
    origin: Origin


@dataclass(frozen=True)
class _Found:
    start: int
    end: int
    name: str
    kind: str
    source: Source
    key: str


# ---------------------------------------------------------------------------- keys

_SEPARATORS = re.compile(r"[\s_\-\u2010-\u2015]+")
# Not + or #: "C++" and "C#" are names.
_EDGE_PUNCTUATION = " \"'`\u2018\u2019\u201c\u201d()[]{}<>.,;:!?*~|/\\"
# "Project: MyApp" (one or two words and a space), or a known kind without it ("project:x");
# "localhost:5432" and "https://..." are no typed names.
_TYPED = re.compile(r"\s*([^\W\d_]+(?: [^\W\d_]+)?)\s*:(\s*)(?=\S)")
_LEADING_ARTICLE = re.compile(r"(?:the|a|an) (?=\S)")
_POSSESSIVE = re.compile(r"(?<=\w)['\u2019]s$")
# Singular names ending in s, which the plural rule would otherwise clip.
_SINGULAR = frozenset({"postgres", "kubernetes", "jenkins", "windows", "news", "series",
                       "species", "analytics", "atlas", "canvas", "pandas", "always"})
# Acronyms' plurals that the length and -is rules would keep: "APIs", "VMs".
_ACRONYM_PLURALS = frozenset({"apis", "clis", "uis", "uris", "guis", "kpis", "vms", "dbs",
                              "ids", "ips", "prs"})


def _typed(name: str) -> tuple[str | None, str]:
    """The kind and the name of a typed name: "Project: MyApp" -> ("project", "MyApp")."""
    match = _TYPED.match(name)
    if match and (match.group(2) or match.group(1).casefold() in _TYPED_KINDS):
        return match.group(1).casefold(), name[match.end():]
    return None, name


def _singular(word: str) -> str:
    """Harman's plural rules, made conservative: short words (AWS, DNS, gas) and endings that
    are mostly singular (-ss, -us, -is, -os: class, status, Redis, macOS) are left alone. A
    proper name the rules still clip (Athens -> athen) keeps one key; only a merge would hurt."""
    if word in _ACRONYM_PLURALS:
        return word[:-1]
    if (len(word) < 4 or not word.isalpha() or word in _SINGULAR or not word.endswith("s")
            or word.endswith(("ss", "us", "is", "os"))):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    return word[:-2] if word.endswith("sses") else word[:-1]


@lru_cache(maxsize=65_536)
def entity_key(name: str) -> str:
    """The key all spellings of an entity share: case, whitespace, hyphens and underscores,
    surrounding punctuation, a possessive, a leading article, a typed prefix and a plural last
    word do not count. Camel case is not split: "MyApp" is "myapp" but "My App" is "my app",
    since splitting would part "MyApp" from "myapp" and joining words would merge phrases.
    Every step only shortens, and they repeat until none applies: idempotent by construction."""
    key = _SEPARATORS.sub(" ", name.casefold()).strip()
    while True:
        before = key
        key = _POSSESSIVE.sub("", key.strip(_EDGE_PUNCTUATION))
        key = _typed(key)[1].strip()
        if article := _LEADING_ARTICLE.match(key):
            key = key[article.end():]
        head, _, last = key.rpartition(" ")
        key = f"{head} {_singular(last)}" if head else _singular(last)
        if key == before:
            return key


def _url_key(url: str) -> str:
    """A URL without its scheme, query, fragment and trailing slash, lower case."""
    rest = url.split("://", 1)[-1]
    return re.split(r"[?#]", rest, maxsplit=1)[0].rstrip("/").casefold()


# ---------------------------------------------------------------------------- recognisers

_FENCE = re.compile(r"^[ \t]*```.*?(?:^[ \t]*```[^\n]*$|\Z)", re.M | re.S)
_URL = re.compile(r"\b(?:https?|ftp|wss?)://[^\s<>()\[\]{}\"'`]+", re.I)
# Dotted names are hosts only under a known top-level domain: "auth.py" and "memory.events"
# are code. At most six labels keep a long dotted run from backtracking.
_HOST = re.compile(
    r"(?<![\w.@/-])((?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.){1,6}"
    r"(?:com|org|net|io|dev|app|ai|cloud|internal|local|lan|corp|svc|edu|gov)"
    r"|localhost|\d{1,3}(?:\.\d{1,3}){3})(?::\d{2,5})?(?![\w-]|\.\w)", re.I)
_DOTTED = re.compile(r"\.\w")
# The head nouns that make "the billing service" a name, and the kind each gives.
_HEADS = {head: kind for kind, heads in (
    ("service", "service server api cluster database db queue broker cache worker job pipeline"
                " gateway proxy endpoint bucket"),
    ("library", "sdk library package plugin client framework"), ("tool", "cli tool"),
    ("host", "host vm machine"), ("repo", "repo repository"), ("team", "team"),
    ("project", "project app")) for head in heads.split()}
_HEADED = re.compile(r"(?<![\w.-])((?:[A-Z]\w* ){0,2}[A-Za-z]\w*)[ -](?i:("
                     + "|".join(_HEADS) + r")s?)(?![\w-])")
# Words that say which one, not what it is: "the new service" names no service.
_GENERIC = frozenset("""
new old other same main each every another external internal separate shared existing current
whole single first second last next previous primary secondary local remote public private
default various several multiple additional specific different
""".split())  # noqa: SIM905  # a list of words reads best as words
_ACRONYM = re.compile(r"(?<![\w&.-])[A-Z][A-Z&]*[A-Z]s?(?![\w&-])")
# Three all-capital words in a row are shouting ("DO NOT DEPLOY"), not names.
_SHOUTING = re.compile(r"\b[A-Z]{2,}(?:[^\w\n]+[A-Z]{2,}\b){2,}")
_WORD = r"[A-Z\u00c0-\u00d6\u00d8-\u00de][a-z\u00df-\u00f6\u00f8-\u00ff]+"
_PROPER = re.compile(rf"(?<![\w'\u2019-]){_WORD}(?:-{_WORD})*"
                     rf"(?: (?:(?:of|de|da|di|du|van|von|der|del|la|le) )?{_WORD}(?:-{_WORD})*)"
                     r"{0,4}(?![\w-])")
# Capitalised for a reason other than being a name: function words and pronouns (the
# lexical stop words), the calendar, time words and discourse markers that open sentences,
# the labels of notes ("Note:", the memory types: "Handoff:"), nouns capitalised before a
# number ("Step 2"), units and time zones written in capitals ("4 GB", "02:00 UTC").
_NOT_NAMES = STOP_WORDS | MONTH_NAMES | frozenset(get_args(MemoryType)) | frozenset("""
monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur thurs fri sat
sun yesterday today tomorrow tonight now later earlier recently soon also however yes yeah no
please thanks thank hi hello hey ok okay well oh maybe perhaps sometimes always never still
finally meanwhile instead otherwise therefore although though since anyway actually really sure
great good nice cool sorry wow lol every everyone someone anyone everything something nothing
one note update summary todo fixme warning error decision lesson context fix cause result
problem solution question answer example tip important reminder rule goal step figure table
section chapter page phase issue ticket sprint version release fyi asap eta tbd wip pr id am pm
kb mb gb tb utc gmt
""".split())  # noqa: SIM905  # a list of words reads best as words
_VERSION = re.compile(r"(?<![\w.])([vV]?)(\d+(?:\.\d+){0,3})(?!\w|\.\w|%)")
# A whole number before a plural or a unit counts things: "met Bob 3 times", "Waits 10 s".
_COUNTED = re.compile(r" +(?:[a-z]{3,}s|s|ms|sec|min|h|kb|mb|gb|tb|x)\b")
_VERSION_WORD = re.compile(r"\bversions? +$", re.I)
# What may stand before a sentence's first word: spaces, quotes, brackets, list bullets.
_OPENERS = frozenset(" \t\"'\u201c\u2018([*>#-\u2022")


def _blank_fences(text: str) -> str:
    if "```" not in text:
        return text
    return _FENCE.sub(lambda fence: re.sub(r"[^\n]", " ", fence.group(0)), text)


def _starts_sentence(text: str, position: int) -> bool:
    for back in range(position - 1, max(position - 12, -1), -1):
        if text[back] not in _OPENERS:
            return text[back] in ".!?:;\n"
    return True


class _Reader:
    """One text being read: what has been found, and which characters are claimed."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.claimed = bytearray(len(text))
        self.found: list[_Found] = []

    def claim(self, start: int, end: int, name: str = "", kind: str = "",
              source: Source = "proper_noun", key: str | None = None) -> bool:
        if self.claimed.find(1, start, end) != -1:
            return False
        self.claimed[start:end] = b"\x01" * (end - start)
        if name and len(name) <= MAX_NAME_CHARS and (key := key or entity_key(name)):
            self.found.append(_Found(start, end, name, kind, source, key))
        return True


def _scan(text: str) -> list[_Found]:
    reader = _Reader(text)
    # The cheap tests first spare most memories the passes that would find nothing.
    for match in _URL.finditer(text) if "://" in text else ():
        url = match.group(0).rstrip(".,;:!?")
        reader.claim(match.start(), match.start() + len(url), url, "url", "url", _url_key(url))
    for match in WIKI_LINK.finditer(text) if "[[" in text else ():
        kind, name = _typed(match.group(1).strip())
        reader.claim(match.start(), match.end(), name.strip(), kind or "concept", "wiki_link")
    # A line opening with a space is not tried: SPEAKER's leading \s* would run on through
    # every blank line below it, once per line.
    for line in re.finditer(r"^(?=\S)", text, re.M):
        speaker = SPEAKER.match(text, line.start())
        words = speaker.group(1).casefold().split() if speaker else []
        if speaker and not any(word in _NOT_NAMES or word in _TYPED_KINDS for word in words):
            name = speaker.group(1)
            kind = "agent" if name.islower() else "person"
            reader.claim(speaker.start(1), speaker.end(1), name, kind, "speaker")
    dotted = _DOTTED.search(text) or "localhost" in text.casefold()
    for match in _HOST.finditer(text) if dotted else ():
        reader.claim(match.start(), match.end(), match.group(1), "host", "host")
    for match in _HEADED.finditer(text):
        # "billing-api" is one word: "Deploying billing-api" names no "Deploying billing api".
        words = match.group(1).split()[-1 if text[match.end(1)] == "-" else 0:]
        while len(words) > 1 and words[0].casefold() in _NOT_NAMES:
            words.pop(0)
        modifier = words[-1].casefold()
        if modifier not in _NOT_NAMES and modifier not in _GENERIC:
            start = match.end(1) - len(" ".join(words))
            reader.claim(start, match.end(), text[start:match.end()],
                         _HEADS[match.group(2).casefold()], "service")
    for match in CODE_IDENTIFIER.finditer(text):
        if not any(pattern.fullmatch(match.group(0))  # e.g, v1.2, APIs: not code
                   for pattern in (ABBREVIATION, _VERSION, _ACRONYM)):
            reader.claim(match.start(), match.end(), match.group(0), "code", "code")
    for match in _SHOUTING.finditer(text):
        reader.claim(match.start(), match.end())
    for match in _ACRONYM.finditer(text):
        if not _not_a_name(match.group(0)):
            reader.claim(match.start(), match.end(), match.group(0), "name", "proper_noun")
    _read_proper_nouns(reader)
    return reader.found


def _not_a_name(word: str) -> bool:
    # Lower case: a connector ("of") left at either end once a non-name is dropped. A plural
    # of a non-name is none either ("on Sundays").
    folded = word.casefold()
    return word.islower() or folded in _NOT_NAMES or _singular(folded) in _NOT_NAMES


def _read_proper_nouns(reader: _Reader) -> None:
    """Capitalised names. A single word opening a sentence counts only when the text also
    capitalises it mid-sentence, or a version follows it ("Postgres 15 is slow"); a run of
    capitalised words ("New York") counts wherever it stands."""
    text, runs = reader.text, []
    for match in _PROPER.finditer(text):
        words = [(match.start() + word.start(), match.start() + word.end())
                 for word in re.finditer(r"\S+", match.group(0))]
        while words and _not_a_name(text[words[0][0]:words[0][1]]):
            words.pop(0)
        while words and _not_a_name(text[words[-1][0]:words[-1][1]]):
            words.pop()
        if words:
            start, end = words[0][0], words[-1][1]
            runs.append((start, end, len(words) > 1 or not _starts_sentence(text, start)))
    mid_sentence = {text[start:end] for start, end, placed in runs if placed}
    weak: dict[int, tuple[int, str]] = {}
    for start, end, placed in runs:
        if placed or text[start:end] in mid_sentence:
            reader.claim(start, end, text[start:end], "name", "proper_noun")
        else:
            weak[end] = (start, text[start:end])
    _read_versions(reader, weak)


def _read_versions(reader: _Reader, weak: dict[int, tuple[int, str]]) -> None:
    """A version belongs to the name right before it ("Postgres 15", "payment SDK 4.2"), or,
    after "version" or as "v1.2", to the last versionable name within 120 characters. A bare
    number, and a year after a name ("PyCon 2024"), is no version."""
    text = reader.text
    named = sorted(reader.found, key=lambda found: found.end)
    ends = [found.end for found in named]
    by_end = {found.end: found for found in named}
    for match in _VERSION.finditer(text):
        prefixed, number = match.group(1), match.group(2)
        if reader.claimed.find(1, match.start(), match.end()) != -1 or (
                not prefixed and "." not in number and (1900 <= int(number[:5]) <= 2099
                                                        or _COUNTED.match(text, match.end()))):
            continue
        gap = 0
        while gap < 3 and match.start() > gap and text[match.start() - gap - 1] == " ":
            gap += 1
        base = by_end.get(match.start() - gap) if 0 < gap <= 2 else None
        if base is None and 0 < gap <= 2 and (candidate := weak.get(match.start() - gap)):
            start, name = candidate
            if reader.claim(start, match.start() - gap, name, "name", "proper_noun"):
                base = reader.found[-1]
        if base is None and (prefixed or _VERSION_WORD.search(text, max(0, match.start() - 9),
                                                              match.start())):
            index = bisect_right(ends, match.start())
            while index and named[index - 1].end >= match.start() - 120:
                if named[index - 1].kind not in _NOT_VERSIONED:
                    base = named[index - 1]
                    break
                index -= 1
        if base is not None and base.kind not in _NOT_VERSIONED:
            reader.claim(match.start(), match.end(), f"{base.name} {match.group(0)}", "version",
                         "version", f"{base.key}@{number}")


# ---------------------------------------------------------------------------- mentions


def mentions_of(text: str, *, title: str | None = None, tags: Sequence[str] = (),
                agent_id: str | None = None) -> list[Mention]:
    """The entities a record names, each once, in order of first mention (its title, its
    text, its tags, its agent), at most `MAX_MENTIONS`."""
    title_kind, title_name = _typed(title) if title else (None, "")
    if title_kind is not None and entity_key(title_name):
        # A page titled "Project: MyApp" is about MyApp, as [[Project: MyApp]] names it.
        found = [_Found(0, 0, title_name.strip(), title_kind, "typed_title",
                        entity_key(title_name))]
        scanned = text
    else:
        found, scanned = [], f"{title}\n{text}" if title else text
    found += sorted(_scan(_blank_fences(scanned)), key=lambda each: each.start)
    end = len(scanned)
    for tag in tags:
        kind, name = _typed(tag)
        name = name.strip()
        if kind is not None and kind in _TYPED_KINDS and len(name) <= MAX_NAME_CHARS \
                and entity_key(name):
            found.append(_Found(end, end, name, kind, "tag", entity_key(name)))
    if agent_id and len(agent_id) <= MAX_NAME_CHARS and entity_key(agent_id):
        found.append(_Found(end, end, agent_id, "agent", "agent", entity_key(agent_id)))
    groups: dict[str, list[_Found]] = {}
    for each in found:
        if each.key in groups or len(groups) < MAX_MENTIONS:
            groups.setdefault(each.key, []).append(each)
    return [_mention(key, group) for key, group in groups.items()]


def _mention(key: str, group: list[_Found]) -> Mention:
    strongest = min(group, key=lambda each: _STRENGTH[each.source])
    names = list(dict.fromkeys(each.name for each in group))
    linked = [each.name for each in group if each.source == "wiki_link"]
    name = (linked + [each for each in names if each != each.lower()] + names)[0]
    return Mention(key, name, strongest.kind, strongest.source, tuple(names[:8]))


@dataclass(frozen=True)
class RecordEntities:
    """What the rules read in one version of a record, as the entity index keeps it."""

    record_id: str
    namespace: str
    version: int
    # The entity its title names: what a wiki-link to the record resolves by.
    page: str | None
    mentions: tuple[Mention, ...]
    relations: tuple[Relation, ...]


def record_entities(record: Record, version: int) -> RecordEntities:
    """The entities a record (a memory, a digest, a document's chunk) names and the relations
    its text states. Co-mentions are left to the reader: they follow from the mentions."""
    return entities_in(record.namespace, record.record_id, version, record.text,
                       title=record.title, tags=record.tags, agent_id=record.agent_id)


def entities_in(namespace: str, record_id: str, version: int, text: str, *,
                title: str | None, tags: Sequence[str],
                agent_id: str | None) -> RecordEntities:
    """`record_entities` of a record given by its fields (a row read for a rebuild)."""
    mentions = mentions_of(text, title=title, tags=tags, agent_id=agent_id)
    page = entity_key(title) or None if title else None
    return RecordEntities(record_id, namespace, version, page, tuple(mentions),
                          tuple([*relations_of(text, mentions), *page_links(page, mentions)]))


def page_links(page: str | None, mentions: Sequence[Mention]) -> list[Relation]:
    """What a page links to: the entity its title names `links_to` each entity it wiki-links,
    as written (confidence 1)."""
    if page is None:
        return []
    return [Relation(page, mention.key, "links_to", 1.0, f"[[{mention.name}]]", "wiki_link")
            for mention in mentions if mention.source == "wiki_link" and mention.key != page]


# ---------------------------------------------------------------------------- relations

# One relation a line, "<" marking the passive, which reads object first ("X was replaced by Y"
# is "Y replaces X"). Auxiliaries fall in the gap before the verb ("has been replaced by").
# "called" alone is left out: "a tool called Foo" names, it does not call.
_PHRASES = """
uses: uses | use | used | using
uses<: used by
depends_on: depends on | depend on | depended on | depending on | relies on | rely on | relied on
depends_on: requires | require | required | needs | need
depends_on<: required by | needed by | depended on by
replaces: replaces | replace | replaced | replacing | supersedes | superseded
replaces<: replaced by | superseded by
calls: calls | call | calling | invokes | invoke | invoked
calls<: called by | invoked by
runs_on: runs on | run on | ran on | running on | hosted on | deployed on | deployed to
runs_on<: hosts
part_of: part of | belongs to | belong to | component of | module of
owns: owns | owned | maintains | maintain | maintained | responsible for
owns<: owned by | maintained by
"""
_MEANING: dict[str, tuple[RelationName, bool]] = {
    phrase.strip(): (cast(RelationName, relation.rstrip("<")), relation.endswith("<"))
    for relation, phrases in (line.split(":") for line in _PHRASES.strip().splitlines())
    for phrase in phrases.split("|")}
# The lookahead on first letters spares trying 80-odd phrases at every word.
_VERB = re.compile(
    r"(?<![\w-])(?=[" + "".join(sorted({phrase[0] for phrase in _MEANING})) + "])(?:"
    + "|".join(r"\s+".join(phrase.split()) for phrase in sorted(_MEANING, key=len, reverse=True))
    + r")(?![\w-])", re.I)
_NEGATED = re.compile(r"(?:\bnot|n't|\bnever|\bno longer)\s+(?:\w+\s+)?$", re.I)
_BREAK = re.compile(r"[.!?;](?:\s|$)|\n")
# An object introduced by one of these plays another role: "X depends for Y on Z".
_PREPOSITIONS = frozenset({"for", "to", "from", "with", "without", "of", "in", "into", "at",
                           "by", "than"})
_CONJUNCTIONS = frozenset({"and", "but", "then", "or", ","})
# What may stand between a conjunction and the next verb: "and has since been replaced by".
_AUXILIARIES = frozenset({"also", "since", "is", "are", "was", "were", "has", "have", "had",
                          "been", "be", "being", "will", "now"})


def _gap_allows(gap: str, words: int) -> bool:
    return (len(gap) <= 60 and len(gap.split()) <= words and not _BREAK.search(gap)
            and not _PREPOSITIONS & set(gap.casefold().split()))


def _occurrences(text: str, mentions: Sequence[Mention]) -> list[tuple[int, int, str]]:
    """Where the text names each mention (longest alias first), as (start, end, key)."""
    # "Postgres 15" is where the text names Postgres.
    keys = {alias.casefold(): mention.key.rsplit("@", 1)[0] if mention.kind == "version"
            else mention.key for mention in mentions
            for alias in (mention.name, *mention.aliases) if alias.strip()}
    if not keys:
        return []
    pattern = re.compile(r"(?<!\w)(?:" + "|".join(
        re.escape(alias) for alias in sorted(keys, key=len, reverse=True)) + r")(?!\w)", re.I)
    return [(match.start(), match.end(), keys[match.group(0).casefold()])
            for match in pattern.finditer(text) if match.group(0).casefold() in keys]


def relations_of(text: str, mentions: Sequence[Mention]) -> list[Relation]:
    """What one sentence says of two of the mentioned entities with one of a closed set of
    verbs ("MyApp depends on the billing service"), once per (source, target, relation). The
    subject is the nearest entity before the verb, the object the first after it; both within
    a few words, in the same sentence. A negated verb ("no longer uses") says nothing."""
    text = _blank_fences(text)
    occurrences = _occurrences(text, mentions)
    named = bytearray(len(text))
    for start, end, _ in occurrences:
        named[start:end] = b"\x01" * (end - start)
    verbs = [verb for verb in _VERB.finditer(text) if named.find(1, verb.start(), verb.end()) == -1
             and not _NEGATED.search(text, max(0, verb.start() - 24), verb.start())]
    ends = [end for _, end, _ in occurrences]
    starts = [start for start, _, _ in occurrences]
    subject_of: dict[int, int] = {}  # an object's occurrence -> its verb's subject occurrence
    relations: dict[tuple[str, str, str], Relation] = {}
    for index, verb in enumerate(verbs):
        before = bisect_right(ends, verb.start()) - 1
        after = bisect_right(starts, verb.end() - 1)
        if before < 0 or after >= len(occurrences):
            continue
        after_gap = text[verb.end():occurrences[after][0]]
        if (index + 1 < len(verbs) and verbs[index + 1].start() < occurrences[after][0]) \
                or not _gap_allows(after_gap, 3):
            continue
        gap = text[occurrences[before][1]:verb.start()]
        previous_end = verbs[index - 1].end() if index else 0
        confidence = PATTERN_CONFIDENCE
        words = set(gap.replace(",", " , ").casefold().split())
        if before in subject_of and not _BREAK.search(gap) and words & _CONJUNCTIONS \
                and words <= _CONJUNCTIONS | _AUXILIARIES:
            before, confidence = subject_of[before], COORDINATED_CONFIDENCE
        elif occurrences[before][0] < previous_end or not _gap_allows(gap, 4):
            continue
        subject_of[after] = before
        relation, passive = _MEANING[" ".join(verb.group(0).casefold().split())]
        (first, _, source), (_, last, target) = occurrences[before], occurrences[after]
        if passive:
            source, target = target, source
        if source != target:
            evidence = " ".join(text[first:last].split())[:200]
            relations.setdefault((source, target, relation), Relation(
                source, target, relation, confidence, evidence, "pattern"))
    return list(relations.values())


def co_mention_confidence(records_together: int) -> float:
    """0.4 for one record naming both, 0.6 for two, 0.7 for three, towards 0.8: each record
    halves the doubt, and co-mention never reaches one explicit sentence (0.9)."""
    if records_together < 1:
        return 0.0
    return MAX_CO_MENTION_CONFIDENCE * (1 - 0.5 ** records_together)


def llm_mentions(named: Sequence[tuple[str, str]]) -> list[Mention]:
    """What the LLM hook named in a record (name, kind), as mentions marked as the hook's
    (source `llm`), each key once."""
    mentions: dict[str, Mention] = {}
    for name, kind in named:
        key = entity_key(name)
        if key and key not in mentions:
            mentions[key] = Mention(key, name, kind, "llm", (name,))
    return list(mentions.values())
