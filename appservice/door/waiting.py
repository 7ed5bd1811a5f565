"""Responses waiting for their runs. A run may finish in any worker on any machine; its finishing commit
NOTIFYs ``summon_door`` (the door surface's ``deliver``), and this wakes, reads which of the runs waited for
have ended — all of them in one statement — and hands each its ending. A slow poll is the safety net (a
notification sent while the listening connection was down, a run ended without a delivery).

A streamed response also follows its run's words as the model says them (``engine/run/pieces.py``: one NOTIFY
on ``summon_pieces`` a piece, from whichever worker holds the run): each piece is handed to the responses
following that run, and wakes their wait. A piece missed (the listening connection was down) is filled in from
the answer when the run ends."""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from appservice.door.tables import DoorTables, EndedRun
from engine.clock import Clock
from engine.errors import StoreError
from engine.store import Store
from engine.tasks import TaskGroup

log = logging.getLogger(__name__)

CHANNEL = "summon_door"
PIECES = "summon_pieces"
CALLS = "summon_door_calls"  # a run's call of a client tool (appservice/door/handed.py)


@dataclass(frozen=True)
class HandedCall:
    """A client tool the run's model called: the call's id, the tool, its arguments as JSON."""

    id: str
    name: str
    arguments: str

    @staticmethod
    def read(payload: str) -> tuple[int, HandedCall] | None:
        try:
            told = json.loads(payload)
            run, call = told["run"], HandedCall(told["id"], told["name"], told["arguments"])
        except (ValueError, KeyError, TypeError):
            return None
        if not isinstance(run, int) or not all(isinstance(v, str) for v in (call.id, call.name, call.arguments)):
            return None
        return run, call


@dataclass(frozen=True)
class Piece:
    """Words a run's model said, as they came: which try of the run, which of its model calls, which piece."""

    attempt: int
    turn: int
    seq: int
    text: str

    @staticmethod
    def read(payload: str) -> tuple[int, Piece] | None:
        """The run and the piece a notification tells; None for one that does not read as a piece."""
        try:
            told = json.loads(payload)
            run, piece = told["run"], Piece(told["attempt"], told["turn"], told["seq"], told["text"])
        except (ValueError, KeyError, TypeError):
            return None
        numbers = (run, piece.attempt, piece.turn, piece.seq)
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in numbers) or not isinstance(piece.text, str):
            return None
        return run, piece


@dataclass
class Following:
    """One response following its run: woken (``event``) by the run's ending and by each piece of its words."""

    words: bool
    event: asyncio.Event = field(default_factory=asyncio.Event)
    ended: EndedRun | None = None
    pieces: deque[Piece] = field(default_factory=deque)
    calls: deque[HandedCall] = field(default_factory=deque)


class Waiters:
    def __init__(self, store: Store, clock: Clock, *, poll_seconds: float = 2.0) -> None:
        self.store = store
        self.clock = clock
        self.poll_seconds = poll_seconds
        self._following: dict[int, list[Following]] = {}
        self._poke = asyncio.Event()

    def start(self, tasks: TaskGroup, stop: asyncio.Event) -> None:
        tasks.spawn(self.store.listen(CHANNEL, self._poke.set, stop), name="door-listen")
        tasks.spawn(self.store.listen(PIECES, lambda: None, stop, payload=self._piece), name="door-pieces")
        tasks.spawn(self.store.listen(CALLS, lambda: None, stop, payload=self._call), name="door-calls")
        tasks.spawn(self._check_when_poked(stop), name="door-waiters")

    @contextmanager
    def following(self, run_id: int, *, words: bool = False) -> Iterator[Following]:
        """Follow run ``run_id`` while this is open: its ending, the client tools its model calls, and with
        ``words`` the pieces of what its model says, in the order told."""
        follow = Following(words)
        self._following.setdefault(run_id, []).append(follow)
        self._poke.set()  # it may have ended already
        try:
            yield follow
        finally:
            left = [f for f in self._following.get(run_id, []) if f is not follow]
            if left:
                self._following[run_id] = left
            else:
                self._following.pop(run_id, None)

    async def next(self, follow: Following, seconds: float) -> None:
        """Until ``follow`` has news (an ending, a piece) or ``seconds`` have passed."""
        if follow.ended is None and not follow.pieces and not follow.calls:
            await self.clock.wait(follow.event, seconds)
        follow.event.clear()

    async def wait(self, run_id: int, seconds: float) -> EndedRun | None:
        """The run's ending once it has one, or None after ``seconds``."""
        with self.following(run_id) as follow:
            await self.next(follow, seconds)
            return follow.ended

    def close(self) -> None:
        """Wake the checker so it sees the stop at once."""
        self._poke.set()

    def _piece(self, payload: str) -> None:
        read = Piece.read(payload)
        if read is None:
            log.warning("a piece notification that does not read as one: %r", payload[:80])
            return
        run_id, piece = read
        for follow in self._following.get(run_id, ()):
            if follow.words:
                follow.pieces.append(piece)
                follow.event.set()

    def _call(self, payload: str) -> None:
        read = HandedCall.read(payload)
        if read is None:
            log.warning("a client-tool notification that does not read as one: %r", payload[:80])
            return
        run_id, call = read
        for follow in self._following.get(run_id, ()):
            follow.calls.append(call)
            follow.event.set()

    async def _check_when_poked(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.clock.wait(self._poke, self.poll_seconds)
            self._poke.clear()
            if not self._following:
                continue
            try:
                ended = await self.store.of(DoorTables).ended(list(self._following))
            except StoreError:
                log.warning("could not read which door turns ended (the database is unavailable); will try again")
                continue
            for row in ended:
                for follow in self._following.get(row.id, ()):
                    follow.ended = row
                    follow.event.set()
