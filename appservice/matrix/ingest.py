"""Ingest is the trigger. In one database transaction per appservice transaction: remember the txn id,
store every event once (by event_id) as the line a person reads, keep the room's state we rely on
(members, power levels, creation, history visibility, encryption), and let a *newly stored* line that
names a bot summon it. What must talk to the homeserver (joining, declining, leaving) is decided here
and carried out by ``rooms`` after the commit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import UTC
from typing import Any

import asyncpg

from appservice.matrix.admin import RoomAdmin
from appservice.matrix.commands import Commands
from appservice.matrix.context import ContextReader, ContextSettings, ThreadFetch
from appservice.matrix.followups import Decline, Followup, Join, LeaveEncrypted
from appservice.matrix.mentions import Puppet, named_bots
from appservice.matrix.outbox import Outbox
from appservice.matrix.presses import POLL_RESPONSES, Presses
from appservice.matrix.said import Line, read_event
from appservice.matrix.surface import answer_content
from engine.content import Bot, Registry
from engine.content.audience import facts_in_room, redact_level
from engine.core.limits import Breach
from engine.run.events import wake
from engine.run.summon import Refused, Summoned, Summons, refusal, summon
from engine.store.db import Database

log = logging.getLogger(__name__)

# Errors that are not this event's fault: the whole appservice transaction fails (500) and Synapse sends it
# again, rather than skipping the event. Anything else is the event's (or a handler's) own, logged and skipped.
RETRY_WHOLE = (asyncpg.InterfaceError, asyncpg.PostgresConnectionError, asyncpg.TransactionRollbackError,
               asyncpg.InternalClientError, OSError)
CANCEL_WORDS = frozenset({"!cancel", "/cancel"})
STOP_KEYS = frozenset({"🛑", "\N{OCTAGONAL SIGN}\N{VARIATION SELECTOR-16}"})
SCRIPT_KEY = "org.summon.script"  # a scripted model's turns, honoured only where the config allows


class Ingest:
    def __init__(
        self,
        db: Database,
        registry: Callable[[], Registry],
        *,
        server_name: str,
        service_user: str,
        accept_scripts: bool = False,
        max_attempts: int = 3,
        context: ContextSettings | None = None,
        fetch_thread: ThreadFetch | None = None,
    ) -> None:
        self.db = db
        self.q = db.q
        self._registry = registry
        self.server_name = server_name
        self.service_user = service_user
        self.accept_scripts = accept_scripts
        self.max_attempts = max_attempts
        # What a bot is given; ``fetch_thread`` reads a thread that predates us from the homeserver.
        self.context = ContextReader(self.q, context, fetch_thread)
        # What a line can be besides a mention, each its own module: a room admin's `!bots …`, a press
        # on a bot's choices (a keycap, a poll vote, a bare number), a `!command`.
        self.admin = RoomAdmin(db, registry, server_name=server_name, service_user=service_user)
        self.presses = Presses(db, registry, ask=self.ask, server_name=server_name)
        self.commands = Commands(db, registry, ask=self.ask, server_name=server_name, service_user=service_user,
                                 scripts=self._script)

    # --- who we are -------------------------------------------------------------------------------

    def puppets(self) -> list[Puppet]:
        return [Puppet(b.user_id, b.name) for b in self._registry().bots.values()]

    def ours(self, user_id: str) -> bool:
        return user_id == self.service_user or (
            user_id.startswith("@bot_") and user_id.endswith(f":{self.server_name}")
        )

    # --- one appservice transaction ----------------------------------------------------------------

    async def transaction(self, conn: asyncpg.Connection, txn_id: str, events: list[dict[str, Any]]) -> list[Followup] | None:
        """Store a transaction's events; None when the transaction was seen before (a replay)."""
        if await conn.fetchval(self.q["record_transaction"], txn_id, len(events)) is None:
            return None
        followups: list[Followup] = []
        for event in events:
            # What an event decides for the homeserver counts only if its savepoint stands.
            decided: list[Followup] = []
            try:
                async with conn.transaction():  # a savepoint: one bad event never loses the others
                    await self.event(conn, event, decided)
            except RETRY_WHOLE:
                raise  # the database went away or asked for a retry: Synapse sends the transaction again
            except Exception:
                log.exception("event %s could not be stored; skipped", event.get("event_id"),
                              extra={"room": event.get("room_id")})
                continue
            followups.extend(decided)
        return followups

    async def event(self, conn: asyncpg.Connection, event: Mapping[str, Any], followups: list[Followup], *,
                    backfill: bool = False) -> None:
        """Store one event. ``backfill`` (a room's state read after a join) only records: nothing in it is
        news, so nobody is woken, summoned or answered."""
        event_type = event.get("type")
        room_id = event.get("room_id")
        if not isinstance(room_id, str) or not isinstance(event_type, str):
            log.warning("event without a room or a type skipped: %r", event.get("event_id"))
            return
        if event_type == "m.room.encrypted":
            # Never stored or read: we cannot, and a bot must not pretend it did.
            return
        await conn.execute(self.q["ensure_room"], room_id)
        await conn.execute(self.q["lock_room"], room_id)
        if event_type == "m.reaction":
            if not await self.presses.reaction(conn, room_id, event):
                await self._reaction(conn, room_id, event)
            return
        if event_type in POLL_RESPONSES:
            await self.presses.poll_response(conn, room_id, event)
            return
        if "state_key" in event:
            await self._state(conn, room_id, event, followups, backfill=backfill)
        line = read_event(event)
        if line is None:
            return
        stored = await conn.fetchval(
            self.q["store_event"], line.event_id, room_id, line.sender, line.event_type,
            event.get("state_key"), line.ts, dict(event.get("content") or {}), line.text,
            line.thread_root, line.reply_to, line.replaces,
        )
        if stored is None:
            return  # seen before: only a newly stored line may summon
        if line.replaces:
            await conn.execute(self.q["apply_edit"], line.replaces, line.sender, line.text, line.ts)
        if line.redacts and await self._may_redact(conn, room_id, line.sender, line.redacts):
            await conn.execute(self.q["redact_event"], line.redacts, room_id)
        if backfill or not self._may_summon(line):
            return
        acted: list[Followup] = []
        try:
            async with conn.transaction():  # the line stays stored whatever acting on it does
                await self._act(conn, line, event, acted)
        except RETRY_WHOLE:
            raise
        except Exception:
            log.exception("line %s was stored, but acting on it failed", line.event_id,
                          extra={"room": room_id, "asker": line.sender})
            return
        followups.extend(acted)

    async def _act(self, conn: asyncpg.Connection, line: Line, event: Mapping[str, Any],
                   followups: list[Followup]) -> None:
        """A newly stored line someone said: a cancel, a room admin's `!bots`, a press, a command, or a
        mention — the first that claims it."""
        if line.text.strip() in CANCEL_WORDS:
            await self._cancel(conn, line)
            return
        if await self.admin.heard(conn, line, event, followups):
            return
        if await self.presses.line(conn, line, event):
            return
        if await self.commands.heard(conn, line, event, followups):
            return
        await self._summon(conn, line, event)

    # --- state -------------------------------------------------------------------------------------

    async def _state(self, conn: asyncpg.Connection, room_id: str, event: Mapping[str, Any],
                     followups: list[Followup], *, backfill: bool = False) -> None:
        event_type = event["type"]
        content = event.get("content")
        content = content if isinstance(content, dict) else {}
        state_key = event.get("state_key")
        if event_type == "m.room.member" and isinstance(state_key, str):
            membership = content.get("membership")
            if not isinstance(membership, str):
                return
            name = content.get("displayname")
            before = await conn.fetchrow(self.q["get_member"], room_id, state_key)
            await conn.execute(self.q["upsert_member"], room_id, state_key, membership,
                               name if isinstance(name, str) else None)
            if self.ours(state_key):
                await self._our_membership(conn, room_id, state_key, membership, event, followups)
            elif not backfill:
                await self._came_or_went(conn, room_id, state_key, membership, before, event)
        elif event_type == "m.room.encryption" and state_key == "":
            if await conn.fetchval(self.q["mark_room_encrypted"], room_id) is not None:
                cancelled = await conn.fetch(self.q["cancel_room_runs"], room_id)
                log.warning("room %s turned encrypted: leaving; %d run(s) cancelled", room_id, len(cancelled),
                            extra={"room": room_id})
                followups.append(LeaveEncrypted(room_id))
        elif event_type == "m.room.power_levels" and state_key == "":
            await conn.execute(self.q["set_room_power_levels"], room_id, content)
        elif event_type == "m.room.create" and state_key == "":
            version = content.get("room_version", "1")
            await conn.execute(self.q["set_room_create"], room_id, content, event.get("sender"),
                               version if isinstance(version, str) else "1")
        elif event_type == "m.room.history_visibility" and state_key == "":
            vis = content.get("history_visibility")
            if isinstance(vis, str):
                await conn.execute(self.q["set_room_history_visibility"], room_id, vis)

    async def _our_membership(self, conn: asyncpg.Connection, room_id: str, user_id: str, membership: str,
                              event: Mapping[str, Any], followups: list[Followup]) -> None:
        if membership == "invite":
            if _stripped_state_encrypted(event):
                await conn.execute(self.q["mark_room_encrypted"], room_id)
                followups.append(Decline(room_id, user_id, "encrypted"))
                return
            room = await conn.fetchrow(self.q["get_room"], room_id)
            if room is not None and room["encrypted"]:
                followups.append(Decline(room_id, user_id, "encrypted"))
                return
            if user_id != self.service_user and not self._offered_in_rooms(user_id):
                followups.append(Decline(room_id, user_id, "not_offered"))
                return
            followups.append(Join(room_id, user_id))
        elif membership == "join":
            await conn.execute(self.q["mark_room_joined"], room_id)

    async def _came_or_went(self, conn: asyncpg.Connection, room_id: str, user_id: str, membership: str,
                            before: asyncpg.Record | None, event: Mapping[str, Any]) -> None:
        """A person (never one of ours) joined or left: the bots in the room that hear it wake (SPEC §6).
        Only a change counts: a join that renames is not a joining, and leaving needs having joined."""
        was_joined = before is not None and before["membership"] == "join"
        if membership == "join" and not was_joined:
            happened = "member.joined"
        elif membership in ("leave", "ban") and was_joined:
            happened = "member.left"
        else:
            return
        event_id = event.get("event_id")
        if not isinstance(event_id, str):
            return
        content = event.get("content")
        name = content.get("displayname") if isinstance(content, dict) else None
        if not isinstance(name, str):
            name = before["display_name"] if before is not None else None
        await wake(conn, self.q, self._registry(), happened, occurrence=event_id, room_id=room_id,
                   subject=user_id, conversation=room_id,
                   facts={"user": user_id, "display_name": name, "membership": membership,
                          "by": event.get("sender")})

    def _offered_in_rooms(self, user_id: str) -> bool:
        return any(b.user_id == user_id and "rooms" in b.surfaces for b in self._registry().bots.values())

    async def _may_redact(self, conn: asyncpg.Connection, room_id: str, redactor: str, target: str) -> bool:
        """A redaction counts when its sender sent the event or holds the room's redact level (what the
        homeserver itself checks before it applies one; a redaction it only forwards is not applied)."""
        sender = await conn.fetchval(self.q["event_sender"], target, room_id)
        if sender is None or sender == redactor:
            return True  # an event we never stored has nothing to redact here; one's own, always
        room = await conn.fetchrow(self.q["get_room"], room_id)
        if room is None:
            return False
        facts = facts_in_room(redactor, room, self.server_name)
        needed = redact_level(room["power_levels"])
        if facts.is_creator or facts.power_level >= needed:
            return True
        log.warning("%s may not redact %s (power %s < %s); not applied", redactor, target, facts.power_level,
                    needed, extra={"room": room_id})
        return False

    # --- cancelling --------------------------------------------------------------------------------

    async def _is_moderator(self, conn: asyncpg.Connection, room_id: str, user_id: str) -> bool:
        room = await conn.fetchrow(self.q["get_room"], room_id)
        if room is None:
            return False
        return facts_in_room(user_id, room, self.server_name).is_moderator

    async def _cancel(self, conn: asyncpg.Connection, line: Line) -> None:
        """`!cancel` stops the sender's unfinished runs in this thread (or the main timeline); a room
        moderator's stops everyone's there."""
        asker = None if await self._is_moderator(conn, line.room_id, line.sender) else line.sender
        ids = await conn.fetch(self.q["request_cancel"], line.room_id, line.thread_root, asker)
        log.info("%s asked to cancel; %d run(s) told to stop", line.sender, len(ids),
                 extra={"room": line.room_id})

    async def _reaction(self, conn: asyncpg.Connection, room_id: str, event: Mapping[str, Any]) -> None:
        """🛑 on a run's progress line (or on the line that summoned it) cancels that run."""
        content = event.get("content")
        rel = content.get("m.relates_to") if isinstance(content, dict) else None
        sender = event.get("sender")
        if not isinstance(rel, dict) or rel.get("rel_type") != "m.annotation" or not isinstance(sender, str):
            return
        if rel.get("key") not in STOP_KEYS or not isinstance(rel.get("event_id"), str) or self.ours(sender):
            return
        asker = None if await self._is_moderator(conn, room_id, sender) else sender
        ids = await conn.fetch(self.q["request_cancel_by_event"], rel["event_id"], asker, room_id)
        log.info("%s reacted 🛑; %d run(s) told to stop", sender, len(ids), extra={"room": room_id})

    # --- summoning ---------------------------------------------------------------------------------

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

    async def _summon(self, conn: asyncpg.Connection, line: Line, event: Mapping[str, Any]) -> None:
        registry = self._registry()
        named = named_bots(line, self.puppets())
        if not named:
            return
        bot = next((b for b in registry.bots.values() if b.user_id == named[0]), None)
        if bot is None:
            return
        await self.ask(conn, line, bot, script=self._script(event))

    async def ask(
        self, conn: asyncpg.Connection, line: Line, bot: Bot, *, prompt: str | None = None,
        trigger_event: str | None = None, extra_context: Mapping[str, Any] | None = None,
        script: list[dict[str, Any]] | None = None,
    ) -> Summoned | Refused:
        """Summon ``bot`` for ``line``'s sender, where the line was said, with every refusal; a ceiling
        refusal is told to them. ``prompt`` replaces the line's words (a press sends the offer's own
        words); ``trigger_event`` replaces the line as the run's one trigger (a reaction, a vote);
        ``extra_context`` rides on the run's context (a command's name and arguments)."""
        registry = self._registry()
        room = await conn.fetchrow(self.q["get_room"], line.room_id)
        assert room is not None
        facts = facts_in_room(line.sender, room, self.server_name)
        bare = Summons(bot=bot.slug, surface="rooms", prompt="", asked_by=line.sender, facts=facts,
                       room_id=line.room_id, encrypted=bool(room["encrypted"]))
        # The context (perhaps a thread fetched from the homeserver) is read only for a summons that can
        # stand; one refused on its face is refused with none.
        context = ({} if refusal(registry, bare) is not None
                   else await self.context.read(conn, line, registry.strings, as_user=bot.user_id))
        if extra_context:
            context = {**context, **extra_context}
        # A plain mention while this person's run with this bot here still works joins that run (SPEC §4):
        # one answer to both, not two runs racing. A press or a command is an act of its own.
        plain = prompt is None and trigger_event is None and not extra_context
        name = next((seen["name"] for seen in context.get("lines", []) if seen.get("event_id") == line.event_id),
                    line.sender)
        later = ({"event_id": line.event_id, "sender": line.sender, "name": name, "said": line.text, "ts": line.ts}
                 if plain else None)
        result = await summon(conn, self.q, registry, Summons(
            bot=bot.slug, surface="rooms", prompt=line.text if prompt is None else prompt,
            asked_by=line.sender, facts=facts, room_id=line.room_id, thread_root=line.thread_root,
            trigger_event=trigger_event or line.event_id, context=context, script=script,
            encrypted=bool(room["encrypted"]), later=later,
        ), max_attempts=self.max_attempts)
        if not isinstance(result, Summoned):
            log.info("line %s named %s but was refused: %s", line.event_id, bot.slug, result.reason,
                     extra={"room": line.room_id, "bot": bot.slug})
            if result.reason == "ceiling" and result.breach is not None:
                await self._tell_ceiling(conn, line, bot.slug, result.breach)
        return result

    async def _tell_ceiling(self, conn: asyncpg.Connection, line: Line, slug: str, over: Breach) -> None:
        """Over a spend ceiling: the person is told which window and when it frees up, in the site's words
        (with none, nothing is said). Nothing was bought."""
        registry = self._registry()
        bot = registry.get(slug)
        words = registry.strings.get("refusals", "ceiling")
        if bot is None or not words or over.frees_at is None:
            return
        text = words.format(bot=bot.name, window=over.window,
                            when=over.frees_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC"))
        content = answer_content(text, thread_root=line.thread_root, reply_to=line.event_id, mention=line.sender)
        await Outbox.enqueue(conn, self.q, txn_id=f"summon.refused.{line.event_id}", room_id=line.room_id,
                             sender=bot.user_id, event_type="m.room.message", content=content)

    def _script(self, event: Mapping[str, Any]) -> list[dict[str, Any]] | None:
        content = event.get("content")
        script = content.get(SCRIPT_KEY) if isinstance(content, dict) else None
        if script is None:
            return None
        if not self.accept_scripts:
            log.warning("a line carried a script but scripts are not accepted here; ignored",
                        extra={"room": event.get("room_id")})
            return None
        return script if isinstance(script, list) else None


def _stripped_state_encrypted(event: Mapping[str, Any]) -> bool:
    unsigned = event.get("unsigned")
    state = unsigned.get("invite_room_state") if isinstance(unsigned, dict) else None
    if not isinstance(state, list):
        return False
    return any(isinstance(s, dict) and s.get("type") == "m.room.encryption" for s in state)
