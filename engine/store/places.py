"""What the engine asks of the places its runs are in, of the surface that keeps them (``Places``), handed to the
store when it is opened: a place's own say (what its admins set, read against the database's now), which of some
users are in it, whether it is sealed (encrypted: nothing may be said there), and since when everybody who reads it
now has been there. A place is the surface's opaque ``place``; the engine only hands it back.

A store opened with none (``NO_PLACES``) knows nothing of any place: no rules, nobody present, nothing sealed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from engine.store.store import Families


@dataclass(frozen=True)
class PlaceRules:
    """A place's own settings (``engine.core.room_settings``) and the database's now, to read quiet hours against."""

    settings: Mapping[str, Any]
    now: datetime


class Places(Protocol):
    async def rules(self, db: Families, place: str) -> PlaceRules | None:
        """The place's own say, or None where it has none."""

    async def present(self, db: Families, place: str, users: Sequence[str]) -> frozenset[str]:
        """Which of ``users`` are in the place now."""

    async def sealed(self, db: Families, place: str) -> bool:
        """Whether nothing may be said there (an encrypted room)."""

    async def read_by_all_since(self, db: Families, place: str) -> datetime | None:
        """Since when everybody who reads the place now has been in it; None when unknown."""


class _Nowhere:
    async def rules(self, db: Families, place: str) -> PlaceRules | None:
        return None

    async def present(self, db: Families, place: str, users: Sequence[str]) -> frozenset[str]:
        return frozenset()

    async def sealed(self, db: Families, place: str) -> bool:
        return False

    async def read_by_all_since(self, db: Families, place: str) -> datetime | None:
        return None


NO_PLACES: Places = _Nowhere()
