"""The Matrix surface, built whole: one collaborator into the next, none calling back into its caller, nothing
set on an object after it is made.

    TransactionEndpoint (HTTP: the homeserver's token, the body)
      → Dispatcher (one DB transaction: the durable txn id, a savepoint per event, by kind to:)
          StateHandler · LineHandler (the claimers in ``claim_order``'s order, a mention last) · Presses · Cancels
          each asking a bot through Asking (engine.run.summon, every refusal)
      → Rooms (after the commit: what the homeserver must be told, remembered until done)

The order things are made in is the order they need each other: Speech → Outbox (speaking) → MatrixSurface
(the outbox's fast path) → one Asking → Hearing → the dispatcher (voice notes, memories) → Rooms (voice).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from appservice.config import speech_from_env
from appservice.hooks import EventHooks
from appservice.matrix.asking.asking import Asking
from appservice.matrix.asking.context import ContextReader, ContextSettings, ThreadBackfill, ThreadFetch
from appservice.matrix.asking.mention import Mention
from appservice.matrix.asking.voice import Hearing, Speaking
from appservice.matrix.claimers.admin import RoomAdmin
from appservice.matrix.claimers.cancels import Cancels
from appservice.matrix.claimers.command_state import CommandState
from appservice.matrix.claimers.commands import Commands
from appservice.matrix.claimers.memories import MemoryCommands
from appservice.matrix.claimers.presses import Presses
from appservice.matrix.delivery.avatar_art import EMOJI_FONT
from appservice.matrix.delivery.avatars import Avatars, Face
from appservice.matrix.delivery.homeserver import Homeserver
from appservice.matrix.delivery.waiting import WaitingLines
from appservice.matrix.dispatch import Dispatcher
from appservice.matrix.errors import MatrixError
from appservice.matrix.inbound.followups import Followup, Join
from appservice.matrix.inbound.lines import (
    AlsoInRooms,
    Claim,
    LineHandler,
    OwnMemories,
    OwnRooms,
    RoomWork,
    VoiceNotes,
)
from appservice.matrix.inbound.said import Line
from appservice.matrix.inbound.state import Invites, StateHandler
from appservice.matrix.inbound.transactions import TransactionEndpoint, TransactionHandler, UserQuery
from appservice.matrix.ours import PUPPET_PREFIX, Ours
from appservice.matrix.outbox import MatrixSender, Outbox
from appservice.matrix.rooms import Rooms
from appservice.matrix.surface import MatrixSurface
from appservice.matrix.tables.room_actions import RoomActionTables
from appservice.matrix.tables.schedules import room_schedules
from appservice.matrix.undelivered import Undelivered
from appservice.parts import Parts, Shared
from appservice.speech.endpoints import Speech
from engine.content import Bot, Registry
from engine.errors import StoreError
from engine.meter import Meter
from engine.run.summon import LIVENESS_SECONDS
from engine.run.ticks import run_ticks
from engine.store import Store, Tx
from engine.surface import SurfaceFacts

log = logging.getLogger(__name__)

PRESENCE_SECONDS = 10.0
# A finished room action is forgotten after this long (with each schedule tick).
KEEP_ROOM_ACTIONS = 30 * 86_400.0


def wire_dispatcher(
    store: Store, registry: Callable[[], Registry], *, server_name: str, service_user: str, facts: SurfaceFacts,
    max_attempts: int = 3, thread_fetch: ThreadFetch | None = None,
    context: ContextSettings | None = None, invites: Invites = "local", elsewhere: RoomWork | None = None,
    own_rooms: Callable[[Asking], OwnRooms] | None = None, meter: Meter | None = None,
    puppet_prefix: str = PUPPET_PREFIX, asking: Asking | None = None, voice: VoiceNotes | None = None,
    memories: OwnMemories | None = None, also: Sequence[AlsoInRooms] = (),
) -> Dispatcher:
    """How a homeserver's transaction is taken in: the dispatcher and the handlers behind it, each handed
    its collaborators (``facts``: who a person is in a room; ``thread_fetch``: the homeserver's threads;
    ``elsewhere``: a room another surface works from, the desk's staff room; ``asking``: the one Asking the
    process's voice notes share, else one of its own; ``voice`` and ``memories``: a line's voice note and the
    memory commands, heard before a mention; ``also``: other surfaces that work in rooms, the social surface's rules)."""
    ours = Ours(registry, server_name=server_name, service_user=service_user, puppet_prefix=puppet_prefix)
    if asking is None:
        asking = new_asking(registry, server_name=server_name, max_attempts=max_attempts, context=context,
                            meter=meter)
    cancels = Cancels(ours, server_name=server_name)
    presses = Presses(registry, ours, asking)
    claims = claim_order(
        ours, elsewhere=elsewhere, cancels=cancels,
        admin=RoomAdmin(registry, server_name=server_name, service_user=service_user,
                        about=tuple(other.about for other in also)), presses=presses,
        memories=memories, commands=Commands(registry, asking, server_name=server_name, service_user=service_user),
        voice=voice, own_rooms=own_rooms(asking) if own_rooms is not None else None,
        mention=Mention(registry, ours, asking), also=also,
    )
    return Dispatcher(store, state=StateHandler(registry, ours, facts, invites=invites),
                      lines=LineHandler(ours, claims), presses=presses, cancels=cancels,
                      threads=ThreadBackfill(thread_fetch, registry, ours, context), elsewhere=elsewhere, also=also)


def claim_order(
    ours: Ours, *, elsewhere: RoomWork | None, cancels: Cancels, admin: RoomAdmin, presses: Presses,
    memories: OwnMemories | None, commands: Commands, voice: VoiceNotes | None, own_rooms: OwnRooms | None,
    mention: Mention, also: Sequence[AlsoInRooms] = (),
) -> tuple[Claim, ...]:
    """The one order a new line is offered in (``LineHandler``): the first that claims it acts on it, and
    the rest never see it. A step another surface brings (``elsewhere``: the desk's staff room; ``own_rooms``:
    the member bots') or a part of this one's that may be absent (``memories``, ``voice``) is left out when
    it is None; the others keep their places."""

    async def voice_note(tx: Tx, line: Line, event: Mapping[str, Any], followups: list[Followup]) -> bool:
        return line.is_voice and voice is not None and await voice.heard(tx, line, followups)

    steps = (
        # The staff room is the desk's to work: a staff member's line there is a reply or a draft's word, never
        # a command or a mention (the desk sees it first, and says when it is any other line).
        None if elsewhere is None else Claim("staff room", lambda tx, line, _e, _f: elsewhere.line(tx, line, ours)),
        # Another surface's rooms (a bridged room's guests are the social surface's alone, and its !rules), before
        # anything could read a guest's line as a command or a question to a bot.
        *(Claim(other.name, other.claim) for other in also),
        # Stopping must work whatever else the line could be read as: a !cancel is never a command or a question.
        Claim("cancel", cancels.claim),
        # !bots is the service's own word to a room's admins, before any bot's command could take it.
        Claim("room admin", admin.claim),
        # A bare number answers the choices a bot just offered here, before it could read as anything else.
        Claim("press", presses.claim),
        # !memories and !forget are the person's own (SPEC §11), whatever a bot's commands are called.
        None if memories is None else Claim("memories", memories.claim),
        # A !command a bot has (content/commands), before its words could be taken as a mention.
        Claim("command", commands.claim),
        # A voice note asks once its words are heard (its hearing remembered); only a voice line is one.
        None if voice is None else Claim("voice note", voice_note),
        # A !word close to a command is answered as a typo, not put to a bot as a question.
        Claim("typo", commands.typo),
        # In a member bot's own room (or a DM with its builder) a bot is talked to without being named.
        None if own_rooms is None else Claim("own room", lambda tx, line, event, _f: own_rooms.line(tx, line, event)),
        # Last, whatever is left: a line that names a bot (or any line in a DM with one) asks it.
        Claim("mention", mention.claim),
    )
    return tuple(step for step in steps if step is not None)


def new_asking(registry: Callable[[], Registry], *, server_name: str, max_attempts: int = 3,
               context: ContextSettings | None = None, meter: Meter | None = None) -> Asking:
    return Asking(registry, ContextReader(context), server_name=server_name, max_attempts=max_attempts, meter=meter)


@dataclass(frozen=True)
class Matrix:
    """The Matrix surface's objects (the tests and benches reach some of them), and its parts."""

    command_state: CommandState
    surface: MatrixSurface
    outbox: Outbox
    speech: Speech
    dispatcher: Dispatcher
    rooms: Rooms
    avatars: Avatars
    parts: Parts


def build_matrix(
    shared: Shared, *, homeserver: Homeserver, on_transaction: TransactionHandler, query_user: UserQuery,
    http: aiohttp.ClientSession, env: Mapping[str, str],
    unpriced: Callable[[], Mapping[str, Bot]], elsewhere: RoomWork | None = None,
    own_rooms: Callable[[Asking], OwnRooms] | None = None, also: Sequence[AlsoInRooms] = (),
) -> Matrix:
    """``on_transaction`` and ``query_user``: the root's (what the appservice endpoint calls); ``http``: the
    process's aiohttp session (the outbox's sender); ``env``: the speech endpoints' settings (SUMMON_STT_*,
    SUMMON_TTS_*); ``unpriced``: the bots refused for a model with no price, now (their puppets say so)."""
    c, store, registry, clock = shared.config, shared.store, shared.registry, shared.clock
    server, service_user, prefix = c.homeserver.server_name, shared.service_user, c.appservice.puppet_prefix
    ours = Ours(registry, server_name=server, service_user=service_user, puppet_prefix=prefix)
    command_state = CommandState(store, homeserver)
    # Voice notes heard and answers said (SPEC §12): one Speech per process, so a fallen endpoint stays fallen.
    speech = Speech(speech_from_env(env), clock, timeout_seconds=c.speech.timeout_seconds,
                    fallen_seconds=c.speech.fallen_seconds)
    outbox = Outbox(store, MatrixSender(http, c.homeserver.url, c.appservice.as_token), clock,
                    undelivered=Undelivered(registry, service_user=service_user, metrics=shared.metrics),
                    speaking=Speaking(store, homeserver, speech))
    surface = MatrixSurface(store, homeserver, registry, shared.tasks, clock, server_name=server,
                            service_user=service_user, commands=command_state, puppet_prefix=prefix,
                            hand_over=outbox.send_now, speaks=speech.settings.speaks)
    asking = new_asking(registry, server_name=server, max_attempts=c.worker.max_attempts, meter=shared.metrics)
    hearing = Hearing(store, homeserver, registry, ours, asking, speech,
                      max_bytes=int(c.speech.max_mib * 1024 * 1024), max_seconds=c.speech.max_seconds,
                      at_once=c.speech.hearings_at_once, per_minute=c.speech.hearings_per_minute,
                      floor_kbps=c.speech.floor_kbps)
    dispatcher = wire_dispatcher(
        store, registry, server_name=server, service_user=service_user, facts=surface,
        max_attempts=c.worker.max_attempts, thread_fetch=homeserver.thread,
        invites=c.appservice.invites, elsewhere=elsewhere, meter=shared.metrics, puppet_prefix=prefix,
        own_rooms=own_rooms, asking=asking, voice=hearing, also=also,
        memories=MemoryCommands(registry, ours, server_name=server, service_user=service_user),
    )

    async def room_action_done(followup: Followup) -> None:
        if isinstance(followup, Join) and followup.user_id != service_user:
            # A puppet that joined (at once, or on a retry) shows its commands there (MSC4332), where it may.
            await command_state.publish_in_room(registry(), followup.room_id, followup.user_id)

    rooms = Rooms(store, homeserver, ours, registry, clock, store_event=dispatcher.one,
                  created=dispatcher.state.created, voice=hearing, on_done=room_action_done)
    # The emoji font where scripts/emoji-font put it, unless SUMMON_EMOJI_FONT names another (as for the script).
    avatars = Avatars(store, homeserver, registry, Path(c.content.dir),
                      service=Face(service_user, c.appservice.display_name, None, c.appservice.avatar),
                      emoji_font=Path(os.environ.get("SUMMON_EMOJI_FONT") or EMOJI_FONT))
    waiting_lines = WaitingLines(store, registry, clock)
    stop, tasks = shared.stop, shared.tasks

    def routes(app: web.Application) -> None:
        TransactionEndpoint(c.appservice.hs_token, on_transaction, query_user).routes(app)
        EventHooks(store, registry, c.hooks.keys, clock, surface).routes(app)

    async def serve() -> None:
        tasks.spawn(outbox.run(stop), name="outbox")
        shared.closing("the outbox sender (woken to see the stop)", wake(outbox))
        await rooms.register_puppets()
        await rooms.register_service(c.appservice.display_name)
        await avatars.set_all()
        tasks.spawn(surface.published(registry()), name="command-state")
        tasks.spawn(rooms.resume(stop), name="room-actions")
        # A run that waits (for a slot or a provider's permit) says so on its progress line.
        tasks.spawn(waiting_lines.run(stop), name="waiting-lines")

    async def presence() -> None:
        """Puppets say whether anything can answer them: with no provider, no bots (SPEC §2)."""
        shown: tuple[bool, str | None, tuple[str, ...]] | None = None
        while not stop.is_set():
            refused = tuple(sorted(unpriced()))
            try:
                state = await store.workers.provider_state(LIVENESS_SECONDS)
                now = (state.usable, None if state.usable else state.mode, refused)
            except StoreError:
                log.warning("could not read the provider status (the database is unavailable)")
                now = (False, None, refused)
            if now != shown:
                await rooms.set_presence(now[0], now[1], refused=list(unpriced().values()))
                shown = now
            await clock.wait(stop, PRESENCE_SECONDS)

    async def ping() -> None:
        """Ping the homeserver: it proves the registration, and makes Synapse retry queued transactions
        at once instead of after its backoff. The homeserver may start after us: keep trying (until stopped)."""
        for attempt in range(60):
            try:
                await homeserver.ping(c.appservice.id)
                log.info("homeserver ping answered")
                shared.metrics.homeserver_ping.set(1)
                return
            except MatrixError as exc:
                if attempt == 0:
                    log.warning("homeserver ping failed (%s); retrying", exc)
            if await clock.wait(stop, 1):
                return
        log.error("the homeserver never answered our ping; is registration.yaml loaded by it?")

    async def published(registry: Registry) -> None:
        await rooms.register_puppets()
        await avatars.set_all()  # a changed avatar file, or glyph, changes the puppet's avatar
        await surface.published(registry)

    parts = Parts(
        surface=surface, routes=routes, serve=serve, on_publish=published,
        background=(("ping", ping), ("presence", presence),
                    ("schedule-ticks", lambda: run_ticks(store, registry, clock, stop, surface=surface,
                                                         resolve_room=homeserver.resolve_alias,
                                                         made=(room_schedules,), prunes=(forget_room_actions,)))),
    )
    return Matrix(command_state=command_state, surface=surface, outbox=outbox, speech=speech, dispatcher=dispatcher,
                  rooms=rooms, avatars=avatars, parts=parts)


async def forget_room_actions(store: Store) -> int:
    return await store.of(RoomActionTables).prune(KEEP_ROOM_ACTIONS)


def wake(outbox: Outbox) -> Callable[[], Awaitable[None]]:
    async def woken() -> None:
        outbox.wake()
    return woken
