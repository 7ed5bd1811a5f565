"""The words a person reads about commands (SPEC §5), all from the site's strings (section ``commands``;
with no words for something, nothing is said): what a field accepts, why arguments were not taken, and
each field as the help describes it. Pure."""

from __future__ import annotations

from engine.content import Arg, Command, Strings
from engine.content.commands import SECTION, Problem

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
                       accepts=what or "", value=_quoted(problem.value or ""), fields=fields(command, strings),
                       matches=people)


QUOTED_CHARS = 60


def _quoted(value: str) -> str:
    """What was written, as the answer quotes it back: one line, and no longer than a glance (a person
    who pasted a page after ``!name`` is told what did not fit, not shown the page again)."""
    value = " ".join(value.split())
    return value if len(value) <= QUOTED_CHARS else value[: QUOTED_CHARS - 1].rstrip() + "…"


def default_text(arg: Arg) -> str | None:
    """A field's default as its author wrote it (``1d``, ``short``, ``true``)."""
    if arg.default is None:
        return None
    if isinstance(arg.default, bool):
        return "true" if arg.default else "false"
    return str(arg.default)


def describe_field(arg: Arg, strings: Strings) -> str | None:
    """One field as the help (and a surface's command list) describes it: "since: How far back — a span
    like 2d (default 1d)"."""
    shape, what = strings.get(SECTION, "help_field"), accepts(arg, strings)
    if shape is None or what is None:
        return None
    text = shape.format(field=arg.name, label=arg.label, accepts=what)
    default, with_default = default_text(arg), strings.get(SECTION, "help_default")
    if default is not None and with_default is not None:
        text += " " + with_default.format(default=default)
    return text
