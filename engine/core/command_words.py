"""The words a person reads about commands (SPEC §5), all from the site's strings (section ``commands``;
with no words for something, nothing is said): what a field accepts, why arguments were not taken, the
help, and the MSC4332 ``m.bot.commands`` state a client draws commands from. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from engine.content import Arg, Command, Strings
from engine.content.audience import facts_in_room, state_level
from engine.core.commands import SECTION, Problem

# MSC4332 state: the stable type, and the unstable one clients ship while the proposal is open.
STATE_TYPES = ("m.bot.commands", "org.matrix.msc4332.commands")


# --- the words a person reads -------------------------------------------------------------------


def accepts(arg: Arg, strings: Strings) -> str | None:
    """What a field takes, in the site's words: "a span like 2d, 48h or 1 week"."""
    text = strings.get(SECTION, arg.kind)
    if text is None:
        return None
    return text.format(choices=", ".join(arg.choices)) if arg.kind == "choice" else text


def fields(command: Command, strings: Strings) -> str:
    """``since (How far back), length (How long)`` — or the site's word for none."""
    if not command.args:
        return strings.get(SECTION, "no_fields") or ""
    shape = strings.get(SECTION, "field") or "{field}"
    return ", ".join(shape.format(field=a.name, label=a.label) for a in command.args)


def explain(problem: Problem, command: Command, strings: Strings) -> str | None:
    """What a person is told when a command's arguments were not taken; None with no words for it."""
    arg = next((a for a in command.args if a.name == problem.field), None)
    key = {"bad": "bad_value", "missing": "missing", "unknown": "unknown_field", "twice": "twice",
           "too_many": "too_many", "ambiguous": "ambiguous"}[problem.why]
    text = strings.get(SECTION, key)
    if text is None:
        return None
    what = accepts(arg, strings) if arg is not None else None
    if arg is not None and what is None:
        return None
    people = ", ".join(f"{p.name} ({p.user_id})" if p.name else p.user_id for p in problem.matches)
    return text.format(command=command.name, field=problem.field or "", label=arg.label if arg else "",
                       accepts=what or "", value=problem.value or "", fields=fields(command, strings),
                       matches=people)


def default_text(arg: Arg) -> str | None:
    """A field's default as its author wrote it (``1d``, ``short``, ``true``)."""
    if arg.default is None:
        return None
    if isinstance(arg.default, bool):
        return "true" if arg.default else "false"
    return str(arg.default)


def describe_field(arg: Arg, strings: Strings) -> str | None:
    """One field for the help and for MSC4332: "since: How far back — a span like 2d (default 1d)"."""
    shape, what = strings.get(SECTION, "help_field"), accepts(arg, strings)
    if shape is None or what is None:
        return None
    text = shape.format(field=arg.name, label=arg.label, accepts=what)
    default, with_default = default_text(arg), strings.get(SECTION, "help_default")
    if default is not None and with_default is not None:
        text += " " + with_default.format(default=default)
    return text


def syntax(command: Command) -> str:
    """MSC4332 syntax: ``summarise {since} {length}``; a text field before the last is quoted, so a
    client fills in a value with spaces that reads back as one."""
    parts = [command.name]
    for index, arg in enumerate(command.args):
        last = index == len(command.args) - 1
        parts.append(f'"{{{arg.name}}}"' if arg.kind == "text" and not last else f"{{{arg.name}}}")
    return " ".join(parts)


def command_state(commands: Iterable[Command], strings: Strings) -> dict[str, Any]:
    """The content of a puppet's MSC4332 ``m.bot.commands`` state: each command's syntax, its
    fields described, and its hint (``m.text`` blocks, as the proposal asks)."""
    listed = []
    for command in commands:
        variables = {arg.name: {"m.text": [{"body": describe_field(arg, strings) or arg.label}]}
                     for arg in command.args}
        entry: dict[str, Any] = {"syntax": syntax(command), "variables": variables}
        entry["description"] = {"m.text": [{"body": command.hint or f"!{command.name}"}]}
        listed.append(entry)
    return {"sigil": "!", "commands": listed}


def may_send_state(user_id: str, event_type: str, room: Mapping[str, Any]) -> bool:
    """Whether ``user_id`` may set ``event_type`` state, by the stored room's own power levels. With none
    known (not read yet, or no event), only a creator is taken to: we never send on a hope."""
    facts = facts_in_room(user_id, room, "")
    return facts.is_creator or facts.power_level >= state_level(room["power_levels"], event_type)
