"""The seam between the loop and whatever answers: a real provider chain or the scripted mock."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from engine.core.messages import ModelRequest, ModelStep


class Answerer(Protocol):
    """Answers one model call for a run. Returns every attempt as a step, in order: the last one either
    answered (``error is None``) or is the one after which the chain gave up (``gave_up``)."""

    async def answer(
        self, request: ModelRequest, *, script: list[dict[str, Any]] | None, turn: int,
    ) -> list[ModelStep]: ...


@dataclass(frozen=True)
class ProviderStatus:
    """What a worker says on its heartbeat: can it answer model calls, and how."""

    usable: bool
    mode: str
    providers: tuple[str, ...] = ()
