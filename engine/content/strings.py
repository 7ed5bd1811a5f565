"""The words a site's bots say that are not a model's: ``content/strings.md`` (SPEC §1, §4).

The engine keeps no English: with no words for something it says nothing. The file is markdown::

    ## bots

    ### endings

    - out_of_money: I have spent what I may on this one. Ask again later,
      or ask a person.

One ``- key: text`` per entry; lines indented under it continue it (joined with a newline); prose
before the first ``##`` is for people and ignored, anything else is refused. The
sections and their keys are the catalogue below, so a misspelt key is refused rather than never said;
``{name}``-style placeholders are checked against what the engine fills in. The kit's file gives the
defaults, the site's file overrides per key, and a bot's own ``endings:`` override both.
"""

from __future__ import annotations

import re
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from string import Formatter

from engine.content.base import CompileError
from engine.core.messages import ENDINGS

SCOPE = "bots"
# section → key → the placeholders the engine fills in for it.
CATALOGUE: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    # How a run that ends without an answer says so (engine.core.messages.ENDINGS).
    "endings": {name: () for name in ENDINGS},
    # Words the engine works with: ``asking`` is the question words dropped before a search
    # (a comma-separated list), so "what do memberships cost" finds memberships; ``language`` is the site's
    # language (a name or an ISO code), which search_site stems in.
    "words": {"asking": (), "language": ()},
    # The framing of what a bot is given: a header over the room's lines or a thread's, and how
    # state changes read ("X joined"); ``later`` heads lines the asker added while the run worked, and
    # ``incomplete`` says a thread's start could not be read.
    "context": {
        "room": ("room",),
        "thread": ("room",),
        "joined": ("name",),
        "left": ("name",),
        "not_transcribed": (),
        # What a bot remembers of the person (memory: person, person+recall), above the conversation.
        "earlier": (), "answered": (), "recalled": (),
        "later": (),
        "incomplete": (),
    },
    # The progress line of a long run, edited in place; while the run waits (for a worker's slot or a
    # provider's permit) it says so, with how many questions are ahead of it.
    "progress": {"working": ("bot",), "still_working": ("bot", "minutes"), "cancel_hint": (),
                 "waiting": ("bot", "ahead"), "waiting_next": ("bot",)},
    # What a person is told when a summons is refused for a reason they can act on: a spend ceiling, too
    # many runs of theirs at once ({live} waiting or running), the deployment's daily spend cap, too many
    # summonses waiting for the bot ({waiting}).
    "refusals": {"ceiling": ("bot", "window", "when"), "too_many": ("bot", "live"), "budget": ("bot", "when"),
                 "queue_full": ("bot", "waiting"),
                 # The rest, said where a surface answers every refusal (the door's errors): not published, not
                 # offered there, not for this person, an encrypted room, not enabled in the room, quiet hours,
                 # no provider, already at work on the conversation, asked already.
                 "not_published": ("bot",), "not_on_surface": ("bot",), "audience": ("bot",),
                 "encrypted": ("bot",), "not_enabled": ("bot",), "quiet": ("bot",), "no_provider": ("bot",),
                 "busy": ("bot",), "duplicate": ("bot",)},
    # `!bots …` to the service (appservice.matrix.claimers.admin): every reply shows a setting's current value and
    # the allowed ones; a bad field names what it takes; a non-admin is told the power level it needs.
    "admin": {
        "usage": ("commands",), "not_admin": ("level", "yours"), "bad": ("field", "value", "allowed", "why"),
        "setting": ("field", "value", "allowed"),
        "offered": (), "none_offered": (), "bot_line": ("glyph", "name", "slug", "about", "here"),
        "here": (), "invited": (), "silenced": (),
        "added": ("bot",), "already": ("bot",), "removed": ("bot",), "not_here": ("bot",),
        "sealed": (), "scheduled": ("n", "bot", "when", "ask", "next"), "schedules": (), "no_schedules": (),
        "schedule_line": ("n", "bot", "when", "ask"), "unscheduled": ("n",),
        "runs": (), "no_runs": (), "run_line": ("run", "bot", "ending", "cost", "when", "asker"),
        "spend": ("today", "month"), "spend_line": ("bot", "today", "month"),
        "cancelling": ("run",),
    },
    # `!commands` (engine.content.commands): what each kind of field accepts, why arguments were not taken,
    # and `!help` (what this person may run here).
    "commands": {
        "span": (), "choice": ("choices",), "person": (), "boolean": (), "number": (), "text": (),
        "field": ("field", "label"), "no_fields": (),
        "bad_value": ("command", "field", "label", "accepts", "value"),
        "missing": ("command", "field", "label", "accepts"),
        "unknown_field": ("command", "field", "fields"),
        "twice": ("command", "field", "label"),
        "too_many": ("command", "value", "fields"),
        "ambiguous": ("command", "field", "label", "value", "matches"),
        "tool_no_bot": ("command", "tool"),
        "help_commands": (), "help_field": ("field", "label", "accepts"), "help_default": ("default",),
        "help_bots": ("bots",), "help_nothing": (), "help_no_provider": (),
        # `!cancel` answered: how many runs were told to stop, or nothing was running; a `!word` close to a
        # command the person may run here (a typo) is pointed at it.
        "cancelled": ("runs",), "nothing_to_cancel": (), "did_you_mean": ("given", "command"),
    },
    # Why a bot is away (its presence status), declines an invite or leaves a room (the reason on its leave event):
    # encrypted, not offered in rooms, the room turned encrypted, no provider (none usable, no key, buying not
    # switched on), its model has no price, an invite from off the server or off the list.
    "reasons": {"encrypted": (), "not_offered": (), "turned_encrypted": (), "no_provider": (), "no_key": (), "not_switched_on": (), "unpriced": (), "not_local": (), "not_listed": ()},
    # A run's answer the homeserver would not take (refused for good, or given up on after retries), told in the
    # room once by the service's own user: whose answer ({bot}) and the homeserver's reason.
    "delivery": {"undelivered": ("bot", "reason")},
    # A bot's choices: a press on a spent offer is told it is gone ({name} took {choice}); the spent
    # set marks the one taken (numbered {number}); a poll's end says who chose what.
    "choices": {"gone": ("bot", "choice", "name"), "taken": ("number", "choice", "name"),
                "poll_ended": ("choice", "name")},
    # The line over a bot's skills in its prompt (one line per skill follows; bodies stay behind open_skill).
    "skills": {"header": ()},
    # What a personal tool tells the model: nobody to ask about (no person at all, or — for account facts —
    # a guest with no account) is a different answer from none (this person has none); a ticket raised.
    # ``private_elsewhere`` goes into the prompt where a personal tool is withheld because others read along;
    # ``shared_now`` is said instead of an answer that read the person's own things when the room stopped being
    # theirs alone while it was worked on (somebody joined, it went public).
    "tools": {"nobody": (), "no_account": (), "none": (), "ticket_raised": ("ticket",), "private_elsewhere": (),
              "shared_now": ("name",)},
    # A person's own memories of a person+recall bot (``!memories``, ``!forget <n>``, ``!forget all``).
    "memories": {"list": ("bot",), "none": ("bot",), "forgot": ("bot", "said"), "forgot_all": ("bot", "count"),
                 "no_such": ("n",), "not_here": (), "which": ("bots",)},
}
PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")
_HEADING = re.compile(r"(#{1,6})\s+(.*?)\s*#*\s*")
_ENTRY = re.compile(r"-\s+([^:\s]+)\s*:\s*(.*)")


def _frozen(mapping: Mapping[str, str]) -> Mapping[str, str]:
    return types.MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class Strings:
    """Resolved words by section and key."""

    sections: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: types.MappingProxyType({}))

    def get(self, section: str, key: str) -> str | None:
        return self.sections.get(section, {}).get(key)

    def section(self, section: str) -> Mapping[str, str]:
        return self.sections.get(section, types.MappingProxyType({}))

    def over(self, base: Strings) -> Strings:
        """These strings, falling back to ``base`` key by key."""
        merged = {
            name: _frozen({**base.section(name), **self.section(name)})
            for name in dict.fromkeys((*base.sections, *self.sections))
        }
        return Strings(types.MappingProxyType(merged))

    def as_dict(self) -> dict[str, dict[str, str]]:
        return {name: dict(entries) for name, entries in self.sections.items()}


def parse_strings(path: str, text: str, surfaces: Mapping[str, Mapping[str, tuple[str, ...]]] | None = None,
                  ) -> Strings | list[CompileError]:
    """``strings.md`` → Strings, or every error in it. ``surfaces``: the sections the deployment's surfaces
    bring (``engine.content.kinds``), beside the engine's own."""
    taken = sorted(set(CATALOGUE) & set(surfaces or {}))
    if taken:
        raise ValueError(f"a surface's strings section is already the engine's: {', '.join(taken)}")
    catalogue: Mapping[str, Mapping[str, tuple[str, ...]]] = {**CATALOGUE, **(surfaces or {})}
    errors: list[CompileError] = []
    found: dict[str, dict[str, str]] = {}
    first_line: dict[tuple[str, str], int] = {}
    scope: str | None = None
    section: str | None = None
    entry: tuple[str, str] | None = None  # (section, key) the indented lines continue

    lines = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        if raw[:1] in (" ", "\t") and entry is not None:
            where, key = entry
            found[where][key] += "\n" + raw.strip()
            continue
        entry = None
        heading = _HEADING.fullmatch(raw)
        if heading is not None:
            level, title = len(heading.group(1)), heading.group(2).strip().lower()
            if level == 1:
                scope = section = None  # a title for people; not a scope
            elif level == 2:
                section = None
                scope = title
                if title != SCOPE:
                    errors.append(CompileError(path, number, f"unknown scope '## {heading.group(2)}' (scopes: {SCOPE})"))
            elif level == 3 and scope == SCOPE:
                section = title if title in catalogue else None
                if section is None:
                    known = ", ".join(catalogue)
                    errors.append(
                        CompileError(path, number, f"unknown section '### {heading.group(2)}' under ## {SCOPE} (sections: {known})")
                    )
            elif level == 3 and scope is None:
                errors.append(CompileError(path, number, f"a ### section belongs under a '## {SCOPE}' heading"))
                scope = "?"  # its entries are not reported again
            elif scope == SCOPE:
                errors.append(CompileError(path, number, "strings go two levels deep: ## scope, then ### section"))
            continue
        match = _ENTRY.fullmatch(raw.strip())
        if match is None and scope is None and not raw.lstrip().startswith("-"):
            continue  # before the first scope: a preamble for people
        if match is None:
            errors.append(
                CompileError(path, number, "a string is a '- key: text' line (or a line indented under one)")
            )
            continue
        if scope != SCOPE:
            if scope is None:
                errors.append(CompileError(path, number, f"a string belongs under '## {SCOPE}' and a ### section"))
            continue  # the unknown scope was reported once, at its heading
        if section is None:
            continue
        key, words = match.group(1), match.group(2).strip()
        keys = catalogue[section]
        if key not in keys:
            errors.append(
                CompileError(path, number, f"unknown key '{key}' in ### {section} (keys: {', '.join(keys)})")
            )
            continue
        if (section, key) in first_line:
            errors.append(
                CompileError(path, number, f"'{key}' is given twice in ### {section} (first at line {first_line[section, key]})")
            )
            continue
        first_line[section, key] = number
        found.setdefault(section, {})[key] = words
        entry = (section, key)

    for (section, key), number in first_line.items():
        words = found[section][key]
        if not words:
            errors.append(CompileError(path, number, f"'{key}' in ### {section} has no words: leave it out to say nothing"))
        allowed = catalogue[section][key]
        offered = ", ".join("{" + a + "}" for a in allowed) or "none"
        for why in _placeholder_problems(words, allowed):
            errors.append(CompileError(path, number, f"'{key}' in ### {section}: {why} (it is given: {offered})"))
    if errors:
        return sorted(errors, key=lambda error: error.line)
    return Strings(types.MappingProxyType({name: _frozen(entries) for name, entries in found.items()}))


def _placeholder_problems(words: str, allowed: tuple[str, ...]) -> list[str]:
    """Read the words as ``str.format`` will: only the given names, bare (``{room}``, never ``{}``,
    ``{room.x}``, ``{room!r}`` or ``{room:>9}``); a literal brace is written ``{{`` or ``}}``. What
    would fail when the words are said fails the compile instead."""
    try:
        parsed = list(Formatter().parse(words))
    except ValueError as exc:
        return [f"a stray brace ({exc}); write a literal one as {{{{ or }}}}"]
    problems: list[str] = []
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if name not in allowed:
            shown = "{" + name + "}" if name else "{}"
            problems.append(f"unknown placeholder {shown}")
        elif spec or conversion:
            problems.append(f"placeholder {{{name}}} takes no format or conversion")
    return problems
