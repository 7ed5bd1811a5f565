"""A line someone said: stored once (by event id) as the words a person reads, with edits and redactions
applied; then, if it is new and somebody's (not one of ours, not a notice), it is offered to the claimers in
their order — written down, with the reason for each, in ``appservice.matrix.build.claim_order`` — and the
first that claims it acts on it (a ``!cancel``, a room admin's ``!bots``, a press on a bot's choices by its
number, a ``!command``, … and last a mention of a bot); the rest never see it."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from appservice.matrix.inbound.followups import Followup
from appservice.matrix.inbound.said import Line
from appservice.matrix.ours import Ours
from appservice.matrix.power import redact_level, standing_in
from appservice.matrix.tables.lines import LineTables
from appservice.matrix.tables.rooms import RoomTables
from engine.errors import StoreUnavailable
from engine.store import Tx

log = logging.getLogger(__name__)


class RoomWork(Protocol):
    """A room another surface works from (the desk's staff room): it sees a new line or a reaction there first,
    and says whether it took it (True) or it is handled as any other."""

    async def line(self, tx: Tx, line: Line, ours: Callable[[str], bool]) -> bool: ...

    async def reaction(self, tx: Tx, room_id: str, event: Mapping[str, Any], ours: Callable[[str], bool]) -> bool: ...


class AlsoInRooms(Protocol):
    """Another surface that works in Matrix rooms (the social surface, in bridged rooms): it is offered each new line
    right after the staff room (``claim``: True when it took it), each reaction nobody before it took, and every
    state event once the rooms surface has kept it (``state``: what it records of a room); ``!bots status`` says
    what it says of the room (``about``)."""

    name: str

    async def claim(self, tx: Tx, line: Line, event: Mapping[str, Any], followups: list[Followup]) -> bool: ...

    async def reaction(self, tx: Tx, room_id: str, event: Mapping[str, Any], ours: Callable[[str], bool]) -> bool: ...

    async def state(self, tx: Tx, room_id: str, event: Mapping[str, Any]) -> None: ...

    async def about(self, tx: Tx, room_id: str) -> str:
        """What it says of the room in ``!bots status`` ("" for nothing)."""
        ...


class VoiceNotes(Protocol):
    """Voice notes that summon a bot (``voice.Hearing``): True when this one does (its hearing is remembered)."""

    async def heard(self, tx: Tx, line: Line, followups: list[Followup]) -> bool: ...


class OwnMemories(Protocol):
    """A person's ``!memories`` / ``!forget`` (``memories.MemoryCommands``): True when the line was one."""

    async def claim(self, tx: Tx, line: Line, event: Mapping[str, Any], followups: list[Followup]) -> bool: ...


class OwnRooms(Protocol):
    """Rooms where a bot is talked to without a mention (a member bot's own room, a DM with its builder): it
    sees a line no command or press took, and says whether it asked a bot for it (True)."""

    async def line(self, tx: Tx, line: Line, event: Mapping[str, Any]) -> bool: ...


Claimer = Callable[[Tx, Line, Mapping[str, Any], list[Followup]], Awaitable[bool]]
"""Whether it took a new line, acting on it (True: nothing after it sees the line)."""


@dataclass(frozen=True)
class Claim:
    """One step of the order a new line is offered in: its name (what the log and the tests say) and its claimer."""

    name: str
    claimer: Claimer


async def first_claim(claims: Sequence[Claim], tx: Tx, line: Line, event: Mapping[str, Any],
                      followups: list[Followup]) -> str | None:
    """The name of the first of ``claims`` that takes ``line`` (None: none did); the rest never see it."""
    for claim in claims:
        if await claim.claimer(tx, line, event, followups):
            return claim.name
    return None


class LineHandler:
    def __init__(self, ours: Ours, claims: Sequence[Claim]) -> None:
        self.ours = ours
        self.claims = tuple(claims)

    async def line(self, tx: Tx, line: Line, event: Mapping[str, Any], followups: list[Followup], *,
                   backfill: bool = False) -> None:
        """Store ``line``; act on it when it is new and may summon (``backfill`` never does)."""
        content = event.get("content")
        stored = await tx.of(LineTables).store(
            event_id=line.event_id, room_id=line.room_id, sender=line.sender, event_type=line.event_type,
            state_key=event.get("state_key"), ts=line.ts, content=dict(content) if isinstance(content, Mapping) else {},
            said=line.text, thread_root=line.thread_root, reply_to=line.reply_to, replaces=line.replaces,
        )
        if not stored:
            return  # seen before: only a newly stored line may summon
        # An edit is stored as itself: a line reads as its latest standing edit when it is read.
        if line.redacts and await self._may_redact(tx, line.room_id, line.sender, line.redacts):
            await self._redact(tx, line.redacts, line.room_id)
        if backfill or not self._may_summon(line):
            return
        acted: list[Followup] = []
        try:
            async with tx.savepoint():  # the line stays stored whatever acting on it does
                await self._act(tx, line, event, acted)
        except StoreUnavailable:
            raise
        except Exception:
            log.exception("line %s was stored, but acting on it failed", line.event_id,
                          extra={"room": line.room_id, "asker": line.sender})
            return
        followups.extend(acted)

    async def _act(self, tx: Tx, line: Line, event: Mapping[str, Any], followups: list[Followup]) -> None:
        """The first that claims the line acts on it."""
        await first_claim(self.claims, tx, line, event, followups)

    def _may_summon(self, line: Line) -> bool:
        # m.notice is never answered (no bot loops), nor our own users' lines, nor edits and redactions.
        return (
            line.event_type == "m.room.message"
            and not line.is_notice
            and not self.ours(line.sender)
            and line.replaces is None
            and line.redacts is None
            and bool(line.text.strip())
        )

    async def _redact(self, tx: Tx, target: str, room_id: str) -> None:
        """Redact ``target`` here and in everything that kept its words (Matrix: a client "SHOULD change the
        affected event in the same way a server does"; a bot drops redacted words from what it remembers).

        - A redacted line leaves every run's stored context in the room, finished runs' too (what a run
          kept is what ``summon runs`` shows and what a resumed run reads), and the ``heard`` steps that
          brought it into a run; the unfinished run it summoned is asked to stop, its asker having taken the
          question back.
        - A redacted edit gives its line back what it replaced (the latest edit still standing, else the
          line's own words), and every run's stored copy of the line reads that now."""
        redacted = await tx.of(LineTables).redact(target, room_id)
        if redacted is None:
            return  # never stored (nothing here to redact), or redacted before
        if redacted.replaces is not None:
            now = await tx.of(LineTables).now_reads(redacted.replaces, room_id)
            runs = await tx.of(LineTables).reword_in_runs(redacted.replaces, room_id, now)
        else:
            cancelled = await tx.of(LineTables).cancel_runs_asked_by(target, room_id)
            if cancelled:
                log.info("line %s was redacted; the run(s) it summoned were told to stop: %s", target, cancelled,
                         extra={"room": room_id})
            runs = await tx.of(LineTables).scrub_from_runs(target, room_id)
        if runs:
            log.info("redaction of %s applied to the stored context of %d run(s)", target, len(runs),
                     extra={"room": room_id})

    async def _may_redact(self, tx: Tx, room_id: str, redactor: str, target: str) -> bool:
        """A redaction counts when its sender sent the event or holds the room's redact level (what the
        homeserver itself checks before it applies one; a redaction it only forwards is not applied)."""
        sender = await tx.of(LineTables).sender_of(target, room_id)
        if sender is None or sender == redactor:
            return True  # an event we never stored has nothing to redact here; one's own, always
        room = await tx.of(RoomTables).get(room_id)
        if room is None:
            return False
        who, needed = standing_in(redactor, room), redact_level(room.power_levels)
        if who.holds(needed):
            return True
        log.warning("%s may not redact %s (power %s < %s); not applied", redactor, target, who.power_level,
                    needed, extra={"room": room_id})
        return False
