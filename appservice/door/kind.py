"""What the voice surface (the door) brings to content (``engine.content.kinds``): a bot file's ``voice:`` (how
the bot sounds, ``appservice.voices``; only on this surface), the ``current_room`` built-in (offered only here; its runtime is
``appservice.door.tools``), and the words of ``### door``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from appservice.voices import VOICE
from engine.content.kinds import Kind, Refuse
from engine.core.messages import ToolSpec

NAME = "voice"
_NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


def _sounds_only_here(values: Mapping[str, Any], refuse: Refuse) -> None:
    if values["voice"] is not None and NAME not in values["surfaces"]:
        refuse(("voice", "surfaces"),
               f"voice: says how the bot sounds, but it is not on the voice surface (surfaces: {', '.join(values['surfaces'])})")


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
    keys=(VOICE,),
    rules=(_sounds_only_here,),
    tools=(CURRENT_ROOM,),
    strings={
        # The door (a spoken conversation): the header over its earlier turns ({name}: the person), where it is —
        # ``in_room`` once a room the person named was verified, ``no_room`` otherwise — and what a response says
        # when the work outlives its turn: where the answer will be posted once it is ready.
        "door": {"header": ("name",), "in_room": ("room",), "no_room": (), "later_room": ("room",), "later_dm": (),
                 "later_nowhere": ()},
    },
)
