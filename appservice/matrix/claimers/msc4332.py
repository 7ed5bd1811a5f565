"""Commands as Matrix clients draw them (MSC4332): the ``m.bot.command`` block a client sends with a line,
and the ``m.bot.commands`` state a puppet publishes (each under the stable and the unstable name, while
the proposal is open). Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from appservice.matrix.power import standing_in, state_level
from appservice.matrix.tables.rooms import Room
from engine.content import Command, Strings
from engine.content.command_words import describe_field

# The structured block a client sends with the line, and the state a client draws commands from.
COMMAND_BLOCKS = ("m.bot.command", "org.matrix.msc4332.command")
STATE_TYPES = ("m.bot.commands", "org.matrix.msc4332.commands")


def from_block(block: object) -> tuple[str, dict[str, str]] | None:
    """An ``m.bot.command`` block → (name, named values); the syntax's first word is the name."""
    if not isinstance(block, Mapping):
        return None
    syntax, variables = block.get("syntax"), block.get("variables") or {}
    if not isinstance(syntax, str) or not isinstance(variables, Mapping) or not syntax.split():
        return None
    name = syntax.split()[0].lstrip("!/").lower()
    values = {str(k).lower(): v for k, v in variables.items() if isinstance(v, str)}
    return (name, values) if name else None


def syntax(command: Command) -> str:
    """``summarise {since} {length}``; a text field before the last is quoted, so a client fills in a value
    with spaces that reads back as one."""
    parts = [command.name]
    for index, arg in enumerate(command.args):
        last = index == len(command.args) - 1
        parts.append(f'"{{{arg.name}}}"' if arg.kind == "text" and not last else f"{{{arg.name}}}")
    return " ".join(parts)


def command_state(commands: Iterable[Command], strings: Strings) -> dict[str, Any]:
    """The content of a puppet's ``m.bot.commands`` state: each command's syntax, its fields described, and
    its hint (``m.text`` blocks, as the proposal asks)."""
    listed = []
    for command in commands:
        variables = {arg.name: {"m.text": [{"body": describe_field(arg, strings) or arg.label}]}
                     for arg in command.args}
        entry: dict[str, Any] = {"syntax": syntax(command), "variables": variables}
        entry["description"] = {"m.text": [{"body": command.hint or f"!{command.name}"}]}
        listed.append(entry)
    return {"sigil": "!", "commands": listed}


def may_send_state(user_id: str, event_type: str, room: Room) -> bool:
    """Whether ``user_id`` may set ``event_type`` state, by the stored room's own power levels. With none
    known (not read yet, or no event), only a creator is taken to: we never send on a hope."""
    return standing_in(user_id, room).holds(state_level(room.power_levels, event_type))
