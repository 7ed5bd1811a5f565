"""A bot's choices (SPEC §4): offers cut from answers, and every press on them (``sql/queries/offers.sql``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engine.store.base import Family, maybe


@dataclass(frozen=True, slots=True)
class Offer:
    """An offer an answer made: its words, its choices and links, where it was made and whether it is taken."""

    id: int
    run_id: int
    bot: str
    room_id: str
    thread_root: str | None
    asked_by: str | None
    words: str
    choices: list[dict[str, Any]]
    links: list[dict[str, Any]]
    style: str
    answer_txn: str
    answer_event: str | None
    poll_txn: str | None
    poll_event: str | None
    taken_by: str | None
    taken_choice: int | None
    taken_at: datetime | None


@dataclass(frozen=True, slots=True)
class TakenPress:
    """The press that summoned a run, with the offer's answer event."""

    how: str
    event_id: str
    answer_event: str | None
    thread_root: str | None


class OfferTables(Family):
    __slots__ = ()

    async def insert(self, *, run_id: int, bot: str, room_id: str, thread_root: str | None, asked_by: str | None,
                     words: str, choices: list[dict[str, Any]], links: list[dict[str, Any]], style: str,
                     answer_txn: str, poll_txn: str | None) -> int | None:
        """Record run ``run_id``'s offer once; None when it was recorded before."""
        offer_id = await self._value("insert_offer", run_id, bot, room_id, thread_root, asked_by, words, choices,
                                     links, style, answer_txn, poll_txn)
        return None if offer_id is None else int(offer_id)

    async def of_run(self, run_id: int) -> Offer | None:
        return maybe(Offer, await self._one("offer_of_run", run_id))

    async def by_answer(self, event_id: str, room_id: str) -> Offer | None:
        return maybe(Offer, await self._one("offer_by_answer", event_id, room_id))

    async def by_poll(self, event_id: str, room_id: str) -> Offer | None:
        return maybe(Offer, await self._one("offer_by_poll", event_id, room_id))

    async def for_number(self, room_id: str, sender: str, thread_root: str | None, reply_to: str | None) -> Offer | None:
        """The offer a bare number from ``sender`` answers: the one replied to, else their latest in the thread."""
        return maybe(Offer, await self._one("offer_for_number", room_id, sender, thread_root, reply_to))

    async def record_press(self, *, offer_id: int, chooser: str, choice: int, how: str, event_id: str,
                           room_id: str, thread_root: str | None) -> int | None:
        """The press's id; None when this event pressed before (a replay)."""
        press = await self._value("record_press", offer_id, chooser, choice, how, event_id, room_id, thread_root)
        return None if press is None else int(press)

    async def take(self, offer_id: int, by: str, choice: int) -> Offer | None:
        """Take the offer once: the offer as taken, or None when it was gone."""
        return maybe(Offer, await self._one("take_offer", offer_id, by, choice))

    async def release(self, offer_id: int) -> None:
        await self._run("release_offer", offer_id)

    async def press_taken(self, press_id: int, run_id: int) -> None:
        await self._run("press_taken", press_id, run_id)

    async def taken_press_of_run(self, run_id: int) -> TakenPress | None:
        return maybe(TakenPress, await self._one("taken_press_of_run", run_id))
