"""What a turn's response says, and how: one completion object, or server-sent events from the first byte.

A streamed response sends its role chunk at once (the shape that lets a front end start its turn-taking and,
later, speak a preamble), then the model's words as content deltas while it is still saying them — streamed from
the provider through the run (``engine/run/pieces.py``), whichever worker holds it — keep-alive comments whenever
nothing else was written for ``door.keepalive_seconds`` (2.5 s by default: well under LiveKit's 5 s client read
timeout), what is left of the answer once the run ends (all of it, the first piece cut for a fast first word by
``engine.core.chunk``, when none of its words came as they were said: the stand-in, a piece missed), a
finishing chunk, the usage when asked for, and ``[DONE]``. A step that only calls tools says nothing.

A turn that fails is an error, never an answer: before the first byte (a whole response) an HTTP status in
OpenAI's error shape; after it, one ``data: {"error": …}`` event and the end of the stream (no ``[DONE]``). The
provider's own sentence is never passed on. A front end that wants the bot's own words for the failure, to
speak them, asks with ``"summon": {"apology": true}``.

A client that goes away (a disconnect, a barge-in that closes the stream) cancels the run: an abandoned answer
that keeps being made is still being paid for.

A run that takes longer than ``wait_seconds`` outlives its turn: the response says where the answer will be
posted when it is ready (the door surface posts it, re-checking the room first).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from appservice.door.asking import Asked
from appservice.door.binding import Ack
from appservice.door.grants import Grant
from appservice.door.shapes import error_body
from appservice.door.surface import DoorSurface
from appservice.door.tables import DoorTables, EndedRun
from appservice.door.waiting import HandedCall, Piece, Waiters
from appservice.door.wires import ChatWire, ResponsesWire, Wire
from appservice.voices import VOICE, Voice
from engine.clock import Clock
from engine.content import Registry
from engine.core.chunk import pieces
from engine.errors import StoreError
from engine.run.refusals import Refused, refusal_words
from engine.store import Store
from engine.tasks import TaskGroup

log = logging.getLogger(__name__)

KEEPALIVE_SECONDS = 2.5
# A live-run limit frees when one of the person's runs ends (a cancelled one at once): the soonest worth trying.
LIVE_RETRY_SECONDS = 2
# A run's ending that is a failure, as OpenAI's error shape has it: the status, the type, and what is said (the
# same on every door; the reason behind it is in the run's row and the log, never in the response).
FAILURES: dict[str, tuple[int, str, str]] = {
    "failed": (502, "server_error", "The bot could not answer: its model failed. Nothing was answered."),
    "out_of_time": (504, "timeout", "The bot ran out of time before it answered."),
    "out_of_steps": (500, "server_error", "The bot ran out of steps before it answered."),
    "out_of_money": (429, "insufficient_quota", "The bot's spend for this turn ran out before it answered."),
    "cancelled": (409, "conflict", "The turn was cancelled before it was answered."),
}
# Each refusal as OpenAI's error shape has it: the HTTP status and the error's type. Its words are the site's
# (``### refusals``, the same on every surface: ``engine.run.refusals.refusal_words``).
STATUSES: dict[str, tuple[int, str]] = {
    "not_published": (404, "model_not_found"), "not_on_surface": (404, "model_not_found"),
    "audience": (403, "permission_denied"), "encrypted": (403, "permission_denied"),
    "not_enabled": (403, "permission_denied"), "quiet": (403, "permission_denied"),
    "no_provider": (503, "service_unavailable"), "busy": (429, "rate_limit_exceeded"), "duplicate": (409, "conflict"),
    "ceiling": (429, "rate_limit_exceeded"), "too_many": (429, "rate_limit_exceeded"),
    "budget": (429, "rate_limit_exceeded"), "queue_full": (429, "rate_limit_exceeded"),
}


@dataclass(frozen=True)
class Said:
    """What came of a turn: the words, the ending (None: answered), and whether the work outlived the turn
    (and where its answer goes when ready: "room", "dm", or None for nowhere)."""

    text: str
    ending: str | None = None
    outlived: bool = False
    posted_to: str | None = None
    # The client tools its model called: the turn ends with them, its run waits for their results.
    calls: tuple[HandedCall, ...] = ()


class Replies:
    def __init__(self, store: Store, registry: Callable[[], Registry], clock: Clock, waiters: Waiters,
                 surface: DoorSurface, tasks: TaskGroup, *, wait_seconds: float,
                 keepalive_seconds: float = KEEPALIVE_SECONDS) -> None:
        self.store = store
        self._registry = registry
        self.clock = clock
        self.waiters = waiters
        self.surface = surface
        self.tasks = tasks
        self.wait_seconds = wait_seconds
        self.keepalive_seconds = keepalive_seconds

    # --- the two shapes ----------------------------------------------------------------------------------

    def wire(self, grant: Grant, asked: Asked, *, responses: bool, include_usage: bool = False) -> Wire:
        """How this turn's answer is written: the Responses API's events, or chat completions'."""
        if responses:
            return ResponsesWire(run_id=asked.run_id, bot=grant.bot, created=self.created())
        return ChatWire(run_id=asked.run_id, bot=grant.bot, created=self.created(), include_usage=include_usage)

    async def whole(self, request: web.Request, grant: Grant, asked: Asked, *, ack: Ack | None,
                    apology: bool = False, responses: bool = False) -> web.Response:
        try:
            said = await self.outcome(grant, asked)
        except asyncio.CancelledError:
            self.cancel(grant, asked.run_id, "the client went away")
            raise
        failure = None if apology else FAILURES.get(said.ending or "")
        if failure is not None:
            status, type_, message = failure
            self._failed(grant, asked, said)
            return web.json_response(error_body(message, type=type_, code=said.ending), status=status,
                                     headers=self.headers(asked))
        tokens = await self.store.of(DoorTables).usage(asked.run_id)
        body = self.wire(grant, asked, responses=responses).whole(said.text, tokens, self.extra(asked, ack, said),
                                                                  said.calls)
        return web.json_response(body, headers=self.headers(asked))

    async def stream(self, request: web.Request, grant: Grant, asked: Asked, *, include_usage: bool,
                     ack: Ack | None, apology: bool = False, responses: bool = False) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                               "X-Accel-Buffering": "no", **self.headers(asked)})
        wire = self.wire(grant, asked, responses=responses, include_usage=include_usage)

        async def write(*events: bytes) -> None:
            for one in events:
                await response.write(one)

        try:
            await response.prepare(request)
            await write(*wire.opening(self.extra(asked, ack, None)))

            async def still_working() -> None:
                await response.write(b": working\n\n")

            # A voice: bot's first words (its file's voice.first) go at once, while the model is still thinking:
            # the fast first piece a listener hears instead of silence.
            voice = self._voice(grant.bot)
            first = voice.first if voice is not None else None
            if first:
                await write(wire.said(f"{first.rstrip()} "))
            spoken = Spoken()

            async def heard(piece: Piece) -> None:
                text = spoken.hear(piece)
                if text:
                    await write(wire.said(text))

            said = await self.outcome(grant, asked, tick=still_working, heard=heard)
            failure = None if apology else FAILURES.get(said.ending or "")
            if failure is not None:
                _status, type_, message = failure
                self._failed(grant, asked, said)
                await write(*wire.failed(error_body(message, type=type_, code=said.ending)))
                await response.write_eof()
                return response
            if said.calls:
                await write(*wire.handed(said.calls))
            else:
                for delta in spoken.rest(said.text) if spoken.any else deltas(said.text):
                    await write(wire.said(delta))
            tokens = await self.store.of(DoorTables).usage(asked.run_id)
            await write(*wire.closing(tokens, self.extra(asked, ack, said), calls=bool(said.calls)))
            await response.write_eof()
        except asyncio.CancelledError:
            self.cancel(grant, asked.run_id, "the client went away mid-stream")
            raise
        except ConnectionResetError:
            self.cancel(grant, asked.run_id, "the client went away mid-stream")
        return response

    # --- waiting for the run -------------------------------------------------------------------------------

    async def outcome(self, grant: Grant, asked: Asked, tick: Callable[[], Awaitable[None]] | None = None,
                      heard: Callable[[Piece], Awaitable[None]] | None = None) -> Said:
        """What the turn came to, waited for up to ``wait_seconds``: ``heard`` is handed each piece of the words
        as the model says them, and ``tick`` is called when nothing was written for a keep-alive's while; past
        ``wait_seconds``, the work outlives the turn."""
        started = self.clock.monotonic()
        # The bot's own patience (voice.wait) over the door's.
        voice = self._voice(grant.bot)
        wait_seconds = voice.wait if voice is not None and voice.wait is not None else self.wait_seconds
        with self.waiters.following(asked.run_id, words=heard is not None) as follow:
            written = started
            while True:
                now = self.clock.monotonic()
                left = wait_seconds - (now - started)
                await self.waiters.next(follow, max(0.0, min(left, self.keepalive_seconds - (now - written))))
                while follow.pieces and heard is not None:
                    await heard(follow.pieces.popleft())
                    written = self.clock.monotonic()
                if follow.calls:
                    # Handed to the client: this turn ends with them; the request bringing their results follows on.
                    return Said("", calls=tuple(follow.calls))
                if follow.ended is not None:
                    return self.said(grant, follow.ended)
                now = self.clock.monotonic()
                if now - started >= wait_seconds:
                    break
                if now - written >= self.keepalive_seconds:
                    if tick is not None:
                        await tick()
                    written = now
        if not await self.store.of(DoorTables).outlive(asked.run_id):
            # It finished as the response gave up: the answer is there after all.
            ended_now = await self.store.of(DoorTables).ended([asked.run_id])
            if ended_now:
                return self.said(grant, ended_now[0])
        return await self.outlived(grant, asked)

    def _voice(self, slug: str) -> Voice | None:
        bot = self._registry().get(slug)
        return VOICE.of(bot) if bot is not None else None

    def said(self, grant: Grant, ended: EndedRun) -> Said:
        if ended.answer is not None:
            return Said(ended.answer)
        ending = ended.ending or ("cancelled" if ended.status == "cancelled" else "failed")
        # The bot's own words for the ending, without the reason: a voice front end speaks what it is given, and
        # the provider's sentence is for the run's row and the log, never for a listener.
        return Said(self.surface.ending_words(grant.bot, ending), ending=ending)

    async def outlived(self, grant: Grant, asked: Asked) -> Said:
        """The work outlives the turn: say where its answer will be posted (the door surface re-checks when it
        is ready, so this is where it would go now)."""
        strings = self._registry().strings
        bot = self._registry().get(grant.bot)
        room = None
        if bot is not None:
            room = await self.surface.where_to_post(self.store, asked.session.room_id, grant.person, bot.user_id)
        log.info("run %s outlives its turn", asked.run_id, extra={"run": asked.run_id, "bot": grant.bot})
        if room is not None and room == asked.session.room_id:
            words = strings.get("door", "later_room")
            return Said(words.format(room=asked.session.room_name or room) if words else "", outlived=True,
                        posted_to="room")
        if room is not None:
            return Said(strings.get("door", "later_dm") or "", outlived=True, posted_to="dm")
        return Said(strings.get("door", "later_nowhere") or "", outlived=True)

    @staticmethod
    def _failed(grant: Grant, asked: Asked, said: Said) -> None:
        log.info("run %s ended %s: the turn is answered with an error", asked.run_id, said.ending,
                 extra={"run": asked.run_id, "bot": grant.bot})

    def cancel_once_asked(self, grant: Grant, asking: asyncio.Future[Asked | Refused], why: str) -> None:
        """Cancel the run ``asking`` makes, once it has made it (a refusal made none)."""
        async def go() -> None:
            try:
                result = await asking
            except Exception:  # the ask failed, so it made no run to cancel; said here, since its handler is gone
                log.warning("a door turn whose client went away was not asked (%s)", why, exc_info=True)
                return
            if isinstance(result, Asked):
                self.cancel(grant, result.run_id, why)

        self.tasks.spawn(go(), name="door-cancel-asked")

    def cancel(self, grant: Grant, run_id: int, why: str) -> None:
        """Cancel the run for a response nobody reads any more — in a task of its own, since the handler's
        own task is being cancelled."""
        async def go() -> None:
            try:
                if await self.store.of(DoorTables).cancel(run_id, grant.id):
                    log.info("run %s cancelled: %s", run_id, why, extra={"run": run_id, "bot": grant.bot})
            except StoreError:
                log.warning("could not cancel run %s (%s); it runs on", run_id, why, extra={"run": run_id})

        self.tasks.spawn(go(), name=f"door-cancel-{run_id}")

    # --- refusals ------------------------------------------------------------------------------------------

    def refusal(self, grant: Grant, refused: Refused) -> tuple[int, str, str, dict[str, str]]:
        """The status, OpenAI's error type, the words and the headers for a turn refused before it was asked: a
        429 says when to try again (``Retry-After``, whole seconds) — when the window frees up for a ceiling or
        the day's cap, ``LIVE_RETRY_SECONDS`` for a live-run limit or a full line."""
        status, type_ = STATUSES.get(refused.reason, (403, "permission_denied"))
        registry = self._registry()
        bot = registry.get(grant.bot)
        message = refusal_words(refused, registry.strings, bot.name if bot is not None else grant.bot)
        headers: dict[str, str] = {}
        if status == 429:
            frees_at = refused.breach.frees_at if refused.breach is not None else None
            wait = (frees_at - self.clock.now()).total_seconds() if frees_at is not None else LIVE_RETRY_SECONDS
            headers["Retry-After"] = str(max(1, math.ceil(wait)))
        return status, type_, message or refused.reason, headers

    # --- the small print -----------------------------------------------------------------------------------

    def created(self) -> int:
        return int(self.clock.now().timestamp())

    @staticmethod
    def headers(asked: Asked) -> dict[str, str]:
        return {"X-Summon-Run": str(asked.run_id), "X-Summon-Room": asked.session.room_id or ""}

    @staticmethod
    def extra(asked: Asked, ack: Ack | None, said: Said | None) -> dict[str, Any]:
        """What the door adds to OpenAI's shape: the run, the room the session is bound to, the claim's ack."""
        session = asked.session
        extra: dict[str, Any] = {
            "run": asked.run_id,
            "room": {"id": session.room_id, "name": session.room_name} if session.room_id else None,
        }
        if ack is not None:
            extra["binding"] = ack.frame()
        if said is not None:
            extra["ending"] = said.ending
            extra["outlived"] = said.outlived
            if said.outlived:
                extra["posted_to"] = said.posted_to
        return extra


class Spoken:
    """What a streamed response has said of its run's words as they came, turn by turn (a model call each), and
    what is left to say of the answer once the run ends. Only the run's first try is passed on (a retried run
    would say it again, differently: its answer fills in), and a turn whose pieces came with a gap stops being
    passed on (the answer fills in the rest)."""

    def __init__(self) -> None:
        self.attempt: int | None = None
        self.turns: dict[int, str] = {}
        self._next: dict[int, int] = {}
        self._gapped: set[int] = set()

    @property
    def any(self) -> bool:
        return bool(self.turns)

    def hear(self, piece: Piece) -> str:
        """The text of ``piece`` to pass on now ("" for none)."""
        if self.attempt is None:
            self.attempt = piece.attempt
        if piece.attempt != self.attempt or piece.turn in self._gapped:
            return ""
        if piece.seq != self._next.get(piece.turn, 1):
            self._gapped.add(piece.turn)
            return ""
        self._next[piece.turn] = piece.seq + 1
        self.turns[piece.turn] = self.turns.get(piece.turn, "") + piece.text
        return piece.text

    def rest(self, answer: str) -> list[str]:
        """What is left to say of ``answer`` (the last model call's words, stripped): what comes after the last
        turn's words said; the whole answer when those are not how it begins (its own words were missed)."""
        said = self.turns[max(self.turns)]
        begun = said.strip()
        if not answer.startswith(begun):
            log.info("a streamed answer did not begin with what was said of it; said whole")
            return deltas(answer)
        rest = answer[len(begun):]
        if said[-1:].isspace():
            rest = rest.lstrip()
        return [rest] if rest else []


def deltas(text: str) -> list[str]:
    """The answer as content deltas: its opening piece first (for a fast first word), then the rest — exact
    slices of it, so the deltas joined are the answer."""
    said = pieces(text)
    if not said:
        return [text] if text else []
    end = text.find(said[0])
    if end < 0:
        return [text]
    end += len(said[0])
    return [part for part in (text[:end], text[end:]) if part]
