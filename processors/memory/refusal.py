"""Refusing low-value writes (seed 000: the writer may refuse content not worth retaining).

Deterministic rules over a memory's redacted text and title. They answer with a reason, or
None to keep the write. Refusing a real memory loses it, while keeping a "thanks!" costs a
row, so every rule refuses only what holds no word that could carry a fact: any word outside
the closed lists below (a noun, a verb, a number, an identifier, a name, a word of a language
the lists do not cover) keeps the write.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

RefusalReason = Literal["too_short", "no_content_words", "filler", "only_a_secret"]


def _words(listed: str) -> list[str]:
    return listed.split()


# A word, a number, or an identifier kept whole ("3.11", "api.example.com", "node-18",
# "it's"): the joining characters only count between word characters.
_TOKEN = re.compile(r"\w(?:[\w'.\-/@:+#]*\w)?")
_MARKER = re.compile(r"\[REDACTED:[a-z_]+\]")
# "Ana: thanks!" is a turn of a conversation written as a memory (bench/retrieval_eval.py
# writes "speaker: text"): the speaker's name says who, not what.
_SPEAKER = re.compile(r"^\s*[A-Z][a-z]+(?: [A-Z][a-z]+)?:\s+")
# A name of address ("thanks, Ana"): one capital, then lower-case letters only, so that
# "PostgreSQL", "AWS" or "S3" never pass for one.
_NAME = re.compile(r"[A-Z][a-z]+")

# English function words: a text made of these alone says nothing.
STOP_WORDS = frozenset(_words("""
a about above after again against all am an and any are aren't as at be because been before
being below between both but by can can't cannot could couldn't did didn't do does doesn't
doing don't down during each few for from further had hadn't has hasn't have haven't having he
he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've if
in into is isn't it it's its itself just let's me more most mustn't my myself no nor not of
off on once only or other ought our ours ourselves out over own same shan't she she'd she'll
she's should shouldn't so some such than that that's the their theirs them themselves then
there there's these they they'd they'll they're they've this those through to too under until
up very was wasn't we we'd we'll we're we've were weren't what what's when when's where
where's which while who who's whom why why's will with won't would wouldn't you you'd you'll
you're you've your yours yourself yourselves also still even really quite much many well
something anything everything nothing one ones thing things oh s t m d ll re ve
"""))

# Greetings, thanks, acknowledgements, farewells and small talk, in English and in a few other
# languages: with function words and names of address only, a text is filler. No word here
# says what someone did ("said", "agreed to"), so that "Ana said yes" is not filler.
FILLER_WORDS = frozenset(_words("""
ok okay okey okie alright hi hello hey hiya howdy yo greetings morning evening afternoon night
bye goodbye cya ciao later soon care thanks thank thx ty tnx cheers appreciate appreciated
welcome pleasure worries np sure yes yeah yea yep yup ya nope nah agreed right true correct
exactly indeed absolutely definitely totally cool nice great good fine awesome amazing
wonderful perfect excellent fantastic super sweet lovely glad happy fun wow whoa yay hooray
lol lmao rofl haha hahaha hehe xd omg brb gtg ttyl noted understood ack roger done got gotcha
see talk catch chat going doing sounds seems looks lets hmm um uh ah oh huh meh mhm wait
whatever anyway anyways maybe please sorry congrats congratulations
merci beaucoup danke schön gracias muchas grazie mille obrigado obrigada спасибо
hola bonjour salut hallo tschüss adiós adios oui si sí ja nein non vale bien bueno genial
谢谢 好的 你好 ありがとう こんにちは
"""))

# The words a name of address stands beside: "hi Ana", "thank you, Ana", "Ana, bye".
GREETINGS = frozenset(_words("""
hi hello hey hiya howdy yo morning evening night bye goodbye cya ciao later see thanks thank
thx ty cheers welcome congrats congratulations merci danke gracias grazie obrigado obrigada
спасибо hola bonjour salut hallo tschüss adiós adios
"""))

# Capitalised, and no one's name: "see you Monday" says when.
_TIMES = frozenset(_words("""
monday tuesday wednesday thursday friday saturday sunday january february march april may june
july august september october november december
"""))

# Laughter and drawn-out interjections, however many letters ("hahahaha", "sooo", "okkk").
_FILLER_FORMS = re.compile(
    r"(?:ha|he|hi|ja|je|ah)+h?|l+o+l+|lma+o+|o+k+(?:a+y+)?|k+|y+a+y+|w+o+w+|h+m+|u+m+|"
    r"a+h+|o+h+|y+e+s+|y+e+a+h+|n+o+|s+o+|h+e+y+|b+y+e+|t+h+x+|x+d+|yu+p+|ye+p+"
)

# What labels a secret ("password:", "my API key"): beside redaction markers alone, a text
# of these keeps nothing but the fact that a secret was there.
_SECRET_LABEL = re.compile(
    r".*(?:password|passwd|pwd|secret|token|api[_\-]?key|access[_\-]?key|credential|creds"
    r"|bearer).*|keys?|api|auth",
    re.IGNORECASE,
)


def refusal_of(text: str, title: str | None) -> RefusalReason | None:
    """Why a memory with this (redacted) text and title is not worth retaining, or None."""
    body = _SPEAKER.sub("", text, count=1)
    unmarked = _MARKER.sub(" ", body)
    words = _tokens(unmarked) + _tokens(title or "")
    idle = [_is_filler_or_function(words, at) for at in range(len(words))]
    if _MARKER.search(body) and all(
            quiet or _SECRET_LABEL.fullmatch(word)
            for word, quiet in zip(words, idle, strict=True)):
        return "only_a_secret"
    if sum(character.isalnum() for character in unmarked + (title or "")) < 2:
        return "too_short"
    if all(word.lower() in STOP_WORDS for word in words):
        return "no_content_words"
    if all(idle):
        return "filler"
    return None


def _tokens(text: str) -> list[str]:
    # A typographic apostrophe ("it\u2019s") is the plain one.
    return _TOKEN.findall(text.replace("\u2019", "'"))


def _is_filler_or_function(words: Sequence[str], at: int) -> bool:
    folded = words[at].lower()
    return folded in STOP_WORDS or _is_filler(folded) or _is_name_of_address(words, at)


def _is_filler(folded: str) -> bool:
    return folded in FILLER_WORDS or bool(_FILLER_FORMS.fullmatch(folded))


def _is_name_of_address(words: Sequence[str], at: int) -> bool:
    """A name just after a greeting or a thanks ("hi Ana", "thank you, Ana"), just before one
    ("Ana, bye"), or after such a name ("thanks, Ana Lima"): who is greeted, not a fact."""
    if not _NAME.fullmatch(words[at]) or words[at].lower() in _TIMES:
        return False
    before = [word.lower() for word in words[max(0, at - 2):at]]
    after = words[at + 1].lower() if at + 1 < len(words) else ""
    return bool(GREETINGS.intersection(before)) or after in GREETINGS or \
        (at > 0 and _is_name_of_address(words, at - 1))
