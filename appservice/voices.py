"""How a bot sounds: a bot file's ``voice:``, the voice surface's key (``appservice.door.kind``), read by the door
and by Matrix rooms when a spoken question is answered out loud."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, StrictFloat

from engine.content.base import Line, Strict, unique
from engine.content.kinds import Key


class Voice(Strict):
    """How a bot on the voice surface sounds: entered as fields in an admin, never typed as grammar."""

    provider: Line | None = None  # the speech provider, when the site has more than one
    voice: Line  # the endpoint's voice
    voices: Annotated[tuple[Line, ...], AfterValidator(unique)] = ()  # the ones a reader may choose
    first: Line | None = None  # the first sentence it says
    wait: Annotated[StrictFloat, Field(gt=0, allow_inf_nan=False)] | None = None  # seconds of silence


VOICE: Key[Voice | None] = Key("voice", Voice | None, None)
