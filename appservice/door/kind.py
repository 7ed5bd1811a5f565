"""What the voice surface (the door) brings to content (``engine.content.kinds``): a bot file's ``voice:`` (how
the bot sounds, ``appservice.voices``; only on this surface), its ``client_tools:`` (the tools the front end
itself runs — ``end_call``, ``navigate`` — that the bot may call through the door: ``appservice.door.handed``),
the ``current_room`` built-in (offered only here; its runtime is ``appservice.door.tools``), and the words of
``### door``.

    client_tools:
      end_call:
        description: End the call, once the person has said goodbye.
      navigate:
        description: Open a page of the app for the person.
        parameters: {type: object, properties: {page: {type: string}}, required: [page]}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from appservice.voices import VOICE
from engine.content.base import Line, Strict
from engine.content.kinds import Key, Kind, Refuse
from engine.core.messages import ToolSpec

NAME = "voice"
_NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
# What a tool may be called on both wires (OpenAI's and Anthropic's function names).
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# The most client tools one bot declares (each is in every call's tools).
MOST_CLIENT_TOOLS = 16


def _schema(value: dict[str, Any]) -> dict[str, Any]:
    if value.get("type") != "object":
        raise ValueError("parameters is a JSON Schema of an object (type: object)")
    if len(repr(value)) > 4000:
        raise ValueError("parameters is at most 4000 characters")
    return value


class ClientTool(Strict):
    """A tool the front end runs: what it is for (the model reads it) and its arguments' JSON Schema."""

    description: Line
    parameters: Annotated[dict[str, Any], AfterValidator(_schema)] = Field(default_factory=lambda: dict(_NO_ARGS))


CLIENT_TOOLS: Key[dict[str, ClientTool] | None] = Key("client_tools", dict[str, ClientTool] | None, None)


def client_tool_specs(bot: object) -> tuple[ToolSpec, ...]:
    """The client tools ``bot`` declares, as the model is offered them (none when its file says none)."""
    declared = CLIENT_TOOLS.of(bot) or {}
    return tuple(ToolSpec(name, tool.description, dict(tool.parameters)) for name, tool in declared.items())


def _sounds_only_here(values: Mapping[str, Any], refuse: Refuse) -> None:
    if values["voice"] is not None and NAME not in values["surfaces"]:
        refuse(("voice", "surfaces"),
               f"voice: says how the bot sounds, but it is not on the voice surface (surfaces: {', '.join(values['surfaces'])})")


def _client_tools_here(values: Mapping[str, Any], refuse: Refuse) -> None:
    declared = values.get("client_tools")
    if not declared:
        return
    if NAME not in values["surfaces"]:
        refuse(("client_tools", "surfaces"), "client_tools: are run by the voice front end, but the bot is not on "
               f"the voice surface (surfaces: {', '.join(values['surfaces'])})")
    if len(declared) > MOST_CLIENT_TOOLS:
        refuse(("client_tools",), f"client_tools: at most {MOST_CLIENT_TOOLS} tools")
    for name in declared:
        if not _TOOL_NAME.fullmatch(name):
            refuse(("client_tools",), f"client_tools: {name!r} is not a tool name (letters, digits, '_', '-'; "
                   "at most 64)")
        elif name in values["tools"] or name == CURRENT_ROOM.name:
            refuse(("client_tools",), f"client_tools: {name!r} is also one of the bot's own tools; a client tool "
                   "needs a name of its own")


CURRENT_ROOM = ToolSpec(
        "current_room",
        "Which room this spoken conversation is in right now: the room the person said they are in (once it "
        "was checked that you and they are both in it), or none — just the two of you. Ask it whenever the "
        "question is where you are, which room this is, or who else can read along; never answer that from "
        "memory or from earlier in the conversation, since the person may have moved since.",
        _NO_ARGS,
    )

DOOR = Kind(
    NAME,
    keys=(VOICE, CLIENT_TOOLS),
    rules=(_sounds_only_here, _client_tools_here),
    tools=(CURRENT_ROOM,),
    strings={
        # The door (a spoken conversation): the header over its earlier turns ({name}: the person), where it is —
        # ``in_room`` once a room the person named was verified, ``no_room`` otherwise — and what a response says
        # when the work outlives its turn: where the answer will be posted once it is ready.
        "door": {"header": ("name",), "in_room": ("room",), "no_room": (), "later_room": ("room",), "later_dm": (),
                 "later_nowhere": ()},
    },
)
