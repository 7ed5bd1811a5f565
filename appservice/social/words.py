"""``!rules …`` parsed, and a rule's phrase matched. Pure: text in, a sub-command or a yes/no out.

The grammar is ``!bots``'s (``appservice.matrix.claimers.admin_words``): fields, not a syntax, and a bad one
comes back as ``Bad`` — the field, what was given and what it accepts — never a guess.

A phrase matches a line when its words appear in the line, in order, side by side, as whole words, whatever
their case: "refund" matches "Where is my REFUND?" and not "refunded". Both are cut into words once, in one
pass (``WORD``), and compared word by word, so a line costs time in proportion to its length and never more:
a guest's line is untrusted input (SPEC §15). A phrase that would match nearly everything — empty, shorter than
three characters, or only stop-words — is refused when it is written.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from appservice.matrix.claimers.admin_words import Bad, resolve_bot

PREFIXES = ("!rules", "/rules")
KINDS = ("dm", "comment", "group")
DESTINATIONS = ("private", "public")
SUBCOMMANDS = ("list", "add", "pause", "resume", "remove", "auto", "history")
FORMS = {
    "list": "list",
    "add": 'add <bot> "<word or phrase>" on dm|comment|group to private|public [in <room id>]',
    "pause": "pause <id>",
    "resume": "resume <id>",
    "remove": "remove <id>",
    "auto": "auto <id> on|off",
    "history": "history <id>",
}
PHRASE_FORM = "a word or phrase in quotes, at least 3 characters, not only common words like “the”"
MAX_PHRASE = 200
MIN_PHRASE = 3
MAX_PHRASE_WORDS = 12
# Words too common to be a rule on their own: a rule on "the" answers every line.
STOP_WORDS = frozenset("""
a about after again all also am an and any are as at be because been before being both but by can could did do
does doing down during each few for from further had has have having he her here hers him his how i if in into is
it its just me more most my no nor not now of off on once only or other our out over own same she should so some
such than that the their them then there these they this those through to too under until up very was we were
what when where which while who whom why will with would you your yours yes ok okay hi hello hey please thanks
""".split())

WORD = re.compile(r"\w+")
ROOM_ID = re.compile(r"![^:\s]{1,200}(:[^\s]{1,200})?")
_QUOTES = {'"': '"', "“": "”", "'": "'", "‘": "’", "«": "»"}


@dataclass(frozen=True)
class Usage:
    """Bare ``!rules help``: what may be said here."""


@dataclass(frozen=True)
class ListRules:
    pass


@dataclass(frozen=True)
class AddRule:
    bot: str
    phrase: str
    kind: str
    destination: str
    room: str | None = None  # written in the review room for this bridged room (None: for the room it is said in)


@dataclass(frozen=True)
class Change:
    """``pause``, ``resume``, ``remove`` or ``history`` of rule ``id``."""

    what: str
    id: int


@dataclass(frozen=True)
class Auto:
    id: int
    on: bool | None  # None: only show whether it is on


RulesCommand = Usage | Bad | ListRules | AddRule | Change | Auto


def is_rules_line(text: str) -> bool:
    head = text.strip().split(maxsplit=1)
    return bool(head) and head[0].lower() in PREFIXES


def words_of(text: str) -> list[str]:
    """``text`` as the words a phrase is matched against: case-folded, punctuation dropped. One linear pass."""
    return [word.casefold() for word in WORD.findall(text)]


def matches(phrase: Sequence[str], line: Sequence[str]) -> bool:
    """Whether the words ``phrase`` stand side by side, in order, in ``line`` (both from ``words_of``). A
    phrase is at most ``MAX_PHRASE_WORDS`` words, so this is linear in the line."""
    n = len(phrase)
    if n == 0 or n > len(line):
        return False
    first = phrase[0]
    return any(word == first and list(line[i:i + n]) == list(phrase) for i, word in enumerate(line))


def phrase_refusal(phrase: str) -> str | None:
    """Why ``phrase`` cannot be a rule's (None: it can)."""
    text = phrase.strip()
    said = words_of(text)
    if not text:
        return "the phrase is empty"
    if len(text) > MAX_PHRASE:
        return f"a phrase is at most {MAX_PHRASE} characters"
    if not said:
        return "the phrase has no words in it, only punctuation"
    if sum(len(w) for w in said) < MIN_PHRASE:
        return f"a phrase shorter than {MIN_PHRASE} characters would match nearly every line"
    if len(said) > MAX_PHRASE_WORDS:
        return f"a phrase is at most {MAX_PHRASE_WORDS} words"
    if all(w in STOP_WORDS for w in said):
        return f"“{text}” is only common words, so it would match nearly every line"
    return None


def line_key(room_id: str, thread: str | None, sender: str, text: str) -> str:
    """Who said what in which conversation, as one key: the same words from the same guest in the same
    conversation are one line to a rule (a bridge replaying its history, or the words said ten times)."""
    said = " ".join(words_of(text))
    return hashlib.sha256("\x1f".join((room_id, thread or "", sender, said)).encode()).hexdigest()


def parse(text: str, bots: Mapping[str, str]) -> RulesCommand:
    """A ``!rules …`` line → what it asks. ``bots``: slug → name of the bots a rule may name."""
    words = text.strip().split()
    if not words or words[0].lower() not in PREFIXES:
        raise ValueError(f"not a !rules line: {text!r}")
    if len(words) == 1:
        return ListRules()
    sub, args = words[1].lower(), words[2:]
    match sub:
        case "help" | "?":
            return Usage()
        case "list":
            return ListRules() if not args else Bad("list", " ".join(args), "nothing after list")
        case "add":
            rest = text.strip().split(maxsplit=3)[3] if len(words) > 3 else ""
            return _add(args[0] if args else "", rest, bots)
        case "pause" | "resume" | "remove" | "history":
            number = _number(args)
            if number is None:
                return Bad("id", " ".join(args), "a rule's number, as !rules lists it")
            return Change(sub, number)
        case "auto":
            number = _number(args[:1])
            if number is None:
                return Bad("id", " ".join(args[:1]), "a rule's number, as !rules lists it")
            if len(args) == 1:
                return Auto(number, None)
            if len(args) == 2 and args[1].lower() in ("on", "off"):
                return Auto(number, args[1].lower() == "on")
            return Bad("auto", " ".join(args[1:]), "on, off")
    return Bad("sub-command", words[1], ", ".join(SUBCOMMANDS))


def _number(args: list[str]) -> int | None:
    number = args[0].lstrip("#") if len(args) == 1 else ""
    return int(number) if number.isdecimal() and 0 < int(number) < 2**62 else None


def _add(bot_word: str, rest: str, bots: Mapping[str, str]) -> RulesCommand:
    slug = resolve_bot(bot_word, bots) if bot_word else None
    if slug is None:
        return Bad("bot", bot_word, ", ".join(bots) or "none",
                   "" if bots else "no bot is published for the social surface (surfaces: [social])")
    phrase, after = _quoted(rest)
    if phrase is None:
        return Bad("phrase", rest.split(" on ", 1)[0].strip(), PHRASE_FORM)
    why = phrase_refusal(phrase)
    if why is not None:
        return Bad("phrase", phrase, PHRASE_FORM, why)
    fields = after.split()
    kind = destination = room = None
    i = 0
    while i < len(fields):
        key = fields[i].lower()
        value = fields[i + 1].lower() if i + 1 < len(fields) else ""
        if key == "on":
            if value not in KINDS:
                return Bad("on", value, ", ".join(KINDS))
            kind = value
        elif key == "to":
            if value not in DESTINATIONS:
                return Bad("to", value, ", ".join(DESTINATIONS))
            destination = value
        elif key == "in":
            room = fields[i + 1] if i + 1 < len(fields) else ""
            if not ROOM_ID.fullmatch(room):
                return Bad("in", room, "a bridged room's id, like !abc123:example.org")
        else:
            return Bad("field", fields[i], "on, to, in")
        i += 2
    if kind is None:
        return Bad("on", "", ", ".join(KINDS), "the one kind of line the rule matches")
    if destination is None:
        return Bad("to", "", ", ".join(DESTINATIONS), "where the reply goes: where the line was said")
    return AddRule(slug, phrase.strip(), kind, destination, room)


def _quoted(text: str) -> tuple[str | None, str]:
    """The phrase in quotes at the start of ``text``, and what follows it."""
    text = text.strip()
    if not text or text[0] not in _QUOTES:
        return None, text
    end = text.find(_QUOTES[text[0]], 1)
    if end < 0:
        return None, text
    return text[1:end], text[end + 1:]
