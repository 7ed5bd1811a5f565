"""The audience grammar (``for:``, ``serves:``, a tool's or skill's ``for:``) and its evaluation.

An expression is one class or a list of classes; a list admits whoever any one of them admits.
Evaluation is pure: the surface says what it knows of the person (a member here? a moderator, an admin?
— a Matrix room says so by its own power levels, in ``appservice/matrix/power.py``) and the site's people
tables add their classes, into ``AudienceFacts``; ``admits`` only compares.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.errors import ContentFault

# The classes that stand alone, and the ones that take an argument after a colon.
PLAIN = ("anyone", "authenticated", "local", "member", "moderator", "admin", "customer", "subscribed")
ARGUED = {
    "user": "user:@name:server",
    "server": "server:<name>",
    "tier": "tier:<slug>",
    "role": "role:<name>",
    "bought": "bought:<product>",
}
# Classes the site's people tables decide; the caller lists a person's in ``site_classes``.
SITE_KINDS = frozenset({"customer", "subscribed", "tier", "role", "bought"})
KNOWN = ", ".join([*PLAIN, *ARGUED.values()])

_USER_ID = re.compile(r"@[^\s:]+:[^\s:][^\s]*")
_SERVER = re.compile(r"[A-Za-z0-9.\-]+(?::[0-9]+)?|\[[0-9A-Fa-f:.]+\](?::[0-9]+)?")
_SLUG = re.compile(r"[a-z0-9][a-z0-9_-]*")
_WORD = re.compile(r"\S+")
_ARG_SHAPES = {"user": _USER_ID, "server": _SERVER, "tier": _SLUG, "role": _WORD, "bought": _WORD}


class AudienceError(ContentFault):
    """An expression that does not parse. ``index`` is the first bad list item, if it was a list."""

    def __init__(self, message: str, index: int | None = None) -> None:
        super().__init__(message)
        self.index = index


@dataclass(frozen=True)
class Term:
    kind: str
    arg: str | None = None

    def __str__(self) -> str:
        return self.kind if self.arg is None else f"{self.kind}:{self.arg}"


@dataclass(frozen=True)
class Audience:
    """Any of ``terms`` admits. ``listed`` remembers whether the author wrote a list, for writing back."""

    terms: tuple[Term, ...]
    listed: bool = False

    def expression(self) -> str | list[str]:
        """The expression as an author writes it."""
        if len(self.terms) == 1 and not self.listed:
            return str(self.terms[0])
        return [str(term) for term in self.terms]

    def __str__(self) -> str:
        return ", ".join(str(term) for term in self.terms)


@dataclass(frozen=True)
class AudienceFacts:
    """What is known about the person asking, gathered by the surface they asked on. ``user_id`` None is
    nobody (an unsigned desk guest): nobody is never a member, a moderator or an admin.

    ``private``: what is said where they are is read by this person alone — no other human is there to
    read it (a Matrix room whose only joined or invited human is them; their own desk conversation). The
    surface says so as a fact; a tool that reads a person's own data is offered only where it holds for
    the person the run is about (``engine.tools.base.offered``)."""

    user_id: str | None
    local_server: str
    is_member: bool = False
    is_moderator: bool = False  # may remove people and what they said here
    is_admin: bool = False  # may change who holds power here (an admin is a moderator too)
    site_classes: frozenset[str] = frozenset()
    private: bool = False

    @property
    def server(self) -> str | None:
        return server_of(self.user_id) if self.user_id is not None else None


def server_of(user_id: str) -> str:
    """The server part of ``@local:server`` (everything after the first colon)."""
    _, _, server = user_id.partition(":")
    return server


def parse_term(text: str) -> Term:
    word = text.strip()
    if word in PLAIN:
        return Term(word)
    kind, colon, arg = word.partition(":")
    if colon and kind in ARGUED:
        if not _ARG_SHAPES[kind].fullmatch(arg):
            raise AudienceError(f"'{word}' is not a valid audience class: write it as {ARGUED[kind]}")
        return Term(kind, arg)
    raise AudienceError(f"unknown audience class '{word}' (known: {KNOWN})")


def parse_audience(value: object) -> Audience:
    """An expression (a class, or a list of them) → ``Audience``. Raises ``AudienceError``."""
    if isinstance(value, Audience):
        return value
    if isinstance(value, str):
        return Audience((parse_term(value),))
    if isinstance(value, list | tuple):
        if not value:
            raise AudienceError("an empty list admits no one: leave the key out to mean anyone, or name who")
        terms: list[Term] = []
        unknown: list[str] = []
        first_bad: int | None = None
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise AudienceError(f"an audience class is a word like 'member', not {item!r}", index)
            try:
                terms.append(parse_term(item))
            except AudienceError as exc:
                if first_bad is None:
                    first_bad = index
                if not str(exc).startswith("unknown"):
                    raise AudienceError(str(exc), index) from None
                unknown.append(item.strip())
        if unknown:
            names = ", ".join(f"'{name}'" for name in unknown)
            plural = "es" if len(unknown) > 1 else ""
            raise AudienceError(f"unknown audience class{plural} {names} (known: {KNOWN})", first_bad)
        return Audience(tuple(terms), listed=True)
    raise AudienceError(f"an audience is a class like 'member' or a list of them, not {value!r}")


def admits(audience: Audience | None, facts: AudienceFacts) -> bool:
    """Whether ``audience`` admits the person ``facts`` describe. None (unset) admits anyone the
    surface already allows."""
    if audience is None:
        return True
    return any(_admits_term(term, facts) for term in audience.terms)


def _admits_term(term: Term, facts: AudienceFacts) -> bool:
    match term.kind:
        case "anyone":
            return True
        case "authenticated":
            return facts.user_id is not None
        case "local":
            return facts.server == facts.local_server
        case "member":
            return facts.user_id is not None and facts.is_member
        case "moderator":
            return facts.user_id is not None and (facts.is_moderator or facts.is_admin)
        case "admin":
            return facts.user_id is not None and facts.is_admin
        case "user":
            return facts.user_id == term.arg
        case "server":
            return facts.server == term.arg
        case _ if term.kind in SITE_KINDS:
            return str(term) in facts.site_classes
    raise AssertionError(f"audience term {term} has no rule")  # parse_term admits only known kinds
