"""Room administration: ``!bots …`` to the service's own user, gated by power level (SPEC §5).

- **Addressed** to the service: the line starts ``!bots`` (or ``/bots``) in a room the service's user
  has joined (a DM with it included), or mentions it. A room where only puppets sit is not addressed:
  the reply comes from the service's user, which could not post there.
- **Gated** by the room's own power levels: the level to send state by default (``state_default``,
  50 unless the room says otherwise; without a power-levels event only the creator, at 100), and room
  version 12 creators always. Anyone else is told, in one line, the level it needs — never silence.
- Every reply is a notice from the service's user, in the line's thread or as a reply to it, under the
  stable txn id ``summon.admin.<event_id>``, and shows a setting's current value and the allowed ones.
- ``add`` / ``remove`` decide here and are carried out by ``rooms`` after the commit (``InvitePuppet``:
  the service's user invites the puppet, which accepts as it accepts any invite where it is offered;
  ``PuppetLeaves``: the puppet leaves by itself — a kick would need the service's user to hold the kick
  level, and leaving needs nothing). Both also write the room's enabled bots, so a removed bot is
  refused here by ``summon`` even when someone names it.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from appservice.matrix.claimers import admin_words as words
from appservice.matrix.delivery.render import answer_content
from appservice.matrix.inbound.followups import Followup, InvitePuppet, PuppetLeaves
from appservice.matrix.inbound.said import Line
from appservice.matrix.power import standing_in, state_level
from appservice.matrix.tables.outbox import OutboxTables
from appservice.matrix.tables.rooms import Room, RoomTables
from appservice.matrix.tables.schedules import RoomScheduleTables
from engine.content import Bot, Registry, Schedule
from engine.content.audience import AudienceFacts, admits
from engine.content.schedule import next_after
from engine.core import room_settings
from engine.store import Tx

log = logging.getLogger(__name__)
SECTION = "admin"
RUNS_SHOWN = 10
ABOUT_CHARS = 100


# What another surface that works in rooms says of one (the social surface: the bridge it is known by), for
# ``!bots status``; "" when it has nothing to say of it.
RoomAbout = Callable[[Tx, str], Awaitable[str]]


class RoomAdmin:
    def __init__(self, registry: Callable[[], Registry], *, server_name: str, service_user: str,
                 about: Sequence[RoomAbout] = ()) -> None:
        self._registry = registry
        self.server_name = server_name
        self.service_user = service_user
        self.about = tuple(about)

    async def claim(self, tx: Tx, line: Line, event: Mapping[str, Any], followups: list[Followup]) -> bool:
        """The order's "room admin" step: True when ``line`` was a `!bots …` for the service (carried out, or
        refused out loud)."""
        if not words.is_bots_line(line.text) or not await self._addressed(tx, line):
            return False
        room = await tx.of(RoomTables).get(line.room_id)
        if room is None:
            return False
        registry = self._registry()
        say = _Say(registry)
        who = standing_in(line.sender, room)
        need = state_level(room.power_levels)
        # Room version 12 creators hold every level (who.is_creator is only ever true there).
        if not who.holds(need):
            log.info("%s may not configure bots here (level %s < %s)", line.sender, who.power_level, need,
                     extra={"room": line.room_id})
            await self._reply(tx, line, say("not_admin", level=need, yours=who.power_level))
            return True
        offered = _offered(registry)
        command = words.parse(line.text, {slug: bot.name for slug, bot in offered.items()})
        text = await self._carry_out(tx, line, room, who.facts(self.server_name), command, offered, say, followups)
        await self._reply(tx, line, text)
        log.info("%s: %s", line.sender, type(command).__name__, extra={"room": line.room_id})
        return True

    async def _addressed(self, tx: Tx, line: Line) -> bool:
        if self.service_user in (line.mentions or ()):
            return True
        member = await tx.of(RoomTables).member(line.room_id, self.service_user)
        return member is not None and member.membership == "join"

    async def _reply(self, tx: Tx, line: Line, text: str) -> None:
        if not text.strip():
            log.warning("no words to answer a !bots line with (strings: ## bots / ### admin)",
                        extra={"room": line.room_id})
            return
        content = answer_content(text, thread_root=line.thread_root, reply_to=line.event_id, mention=line.sender)
        await tx.of(OutboxTables).enqueue(txn_id=f"summon.admin.{line.event_id}", room_id=line.room_id,
                                sender=self.service_user, event_type="m.room.message", content=content)

    # --- the sub-commands ---------------------------------------------------------------------------

    async def _carry_out(self, tx: Tx, line: Line, room: Room, facts: AudienceFacts, command: words.BotsCommand,
                         offered: Mapping[str, Bot], say: _Say, followups: list[Followup]) -> str:
        encrypted = room.encrypted
        settings: Mapping[str, Any] = room.settings or {}
        if isinstance(command, words.AddSchedule | words.ListSchedules | words.Unschedule) and encrypted:
            return say("sealed")
        match command:
            case words.Usage():
                return self._usage(say, encrypted)
            case words.Bad(field, given, allowed, why):
                return say.lines(say("bad", field=field, value=given, allowed=allowed, why=why or ""),
                                 self._usage(say, encrypted))
            case words.ListBots():
                return await self._list(tx, line.room_id, settings, offered, say)
            case words.Status():
                return await self._status(tx, line.room_id, settings, offered, say)
            case words.AddBot(slug):
                return await self._add(tx, line, settings, offered, slug, say, followups)
            case words.RemoveBot(slug):
                return await self._remove(tx, line, settings, offered, slug, say, followups)
            case words.SetChoices(value):
                if value is not None:
                    settings = await tx.of(RoomTables).set_setting(line.room_id, "choices", value)
                return say("setting", field="choices", value=room_settings.choices(settings),
                           allowed=", ".join(words.CHOICES))
            case words.SetQuiet(value):
                if value == "off":
                    settings = await tx.of(RoomTables).clear_setting(line.room_id, "quiet")
                elif value is not None:
                    settings = await tx.of(RoomTables).set_setting(line.room_id, "quiet", value.as_setting())
                hours = room_settings.quiet(settings)
                return say("setting", field="quiet", value=str(hours) if hours else "off",
                           allowed=words.QUIET_FORM)
            case words.AddSchedule(slug, schedule, ask):
                # A room schedule asks on its maker's behalf: the bot's `for:` must admit them (and their
                # spend ceilings count it), it may not come round faster than MIN_PERIOD, and a room keeps
                # at most MAX_SCHEDULES.
                why = schedule_refusal(offered[slug], schedule, facts, await tx.of(RoomScheduleTables).count_in(line.room_id))
                if why is not None:
                    return say("bad", field="schedule", value=slug, allowed=words.WHEN_FORM, why=why)
                return await self._schedule(tx, line, slug, schedule, ask, offered, say)
            case words.ListSchedules():
                return await self._schedules(tx, line.room_id, offered, say)
            case words.Unschedule(n):
                return await self._unschedule(tx, line.room_id, n, offered, say)
            case words.Runs():
                return await self._runs(tx, line.room_id, offered, say)
            case words.Spend():
                return await self._spend(tx, line.room_id, offered, say)
            case words.Cancel(run):
                return await self._cancel(tx, line.room_id, run, say)
        raise AssertionError(f"a !bots sub-command with no rule: {command!r}")

    def _usage(self, say: _Say, encrypted: bool) -> str:
        return say("usage", commands=" · ".join(f"`{words.FORMS[name]}`" for name in words.offered(encrypted)))

    async def _memberships(self, tx: Tx, room_id: str, offered: Mapping[str, Bot]) -> dict[str, str]:
        rows = await tx.of(RoomTables).ours(room_id, [b.user_id for b in offered.values()])
        by_user = {r.user_id: r.membership for r in rows}
        return {slug: by_user[bot.user_id] for slug, bot in offered.items() if bot.user_id in by_user}

    def _bots_setting(self, settings: Mapping[str, Any], offered: Mapping[str, Bot],
                      memberships: Mapping[str, str], say: _Say) -> str:
        here = [slug for slug in offered if slug in memberships and room_settings.enabled(settings, slug)]
        return say("setting", field="bots", value=", ".join(here) or "none", allowed=", ".join(offered) or "none")

    async def _list(self, tx: Tx, room_id: str, settings: Mapping[str, Any], offered: Mapping[str, Bot],
                    say: _Say) -> str:
        if not offered:
            return say("none_offered")
        memberships = await self._memberships(tx, room_id, offered)
        entries = []
        for slug, bot in offered.items():
            membership = memberships.get(slug)
            where = ""
            if membership == "join":
                where = say("here") if room_settings.enabled(settings, slug) else say("silenced")
            elif membership == "invite":
                where = say("invited")
            entries.append("- " + say("bot_line", glyph=bot.glyph or "", name=bot.name, slug=slug,
                                      about=_about(bot), here=where).strip())
        return say.lines(say("offered"), "\n".join(entries), self._bots_setting(settings, offered, memberships, say))

    async def _status(self, tx: Tx, room_id: str, settings: Mapping[str, Any], offered: Mapping[str, Bot],
                      say: _Say) -> str:
        """The room's bots and settings as they stand, and what the other surfaces that work here say of it."""
        memberships = await self._memberships(tx, room_id, offered)
        hours = room_settings.quiet(settings)
        others = [await about(tx, room_id) for about in self.about]
        return say.lines(self._bots_setting(settings, offered, memberships, say),
                         say("setting", field="choices", value=room_settings.choices(settings),
                             allowed=", ".join(words.CHOICES)),
                         say("setting", field="quiet", value=str(hours) if hours else "off", allowed=words.QUIET_FORM),
                         *others)

    async def _add(self, tx: Tx, line: Line, settings: Mapping[str, Any], offered: Mapping[str, Bot], slug: str,
                   say: _Say, followups: list[Followup]) -> str:
        bot = offered[slug]
        memberships = await self._memberships(tx, line.room_id, offered)
        was = memberships.get(slug)
        settings = await tx.of(RoomTables).set_setting(line.room_id, "bots", room_settings.with_bot(settings, slug, offered))
        if was not in ("join", "invite"):
            followups.append(InvitePuppet(line.room_id, bot.user_id, self.service_user))
            memberships[slug] = "invite"
        said = say("already" if was == "join" else "added", bot=bot.name)
        return say.lines(said, self._bots_setting(settings, offered, memberships, say))

    async def _remove(self, tx: Tx, line: Line, settings: Mapping[str, Any], offered: Mapping[str, Bot],
                      slug: str, say: _Say, followups: list[Followup]) -> str:
        bot = offered[slug]
        memberships = await self._memberships(tx, line.room_id, offered)
        was = memberships.pop(slug, None)
        answered = was is not None and room_settings.enabled(settings, slug)
        settings = await tx.of(RoomTables).set_setting(line.room_id, "bots",
                                              room_settings.without_bot(settings, slug, offered))
        if was in ("join", "invite"):
            followups.append(PuppetLeaves(line.room_id, bot.user_id, f"removed with !bots by {line.sender}"))
        said = say("removed" if answered else "not_here", bot=bot.name)
        return say.lines(said, self._bots_setting(settings, offered, memberships, say))

    async def _schedule(self, tx: Tx, line: Line, slug: str, schedule: Schedule, ask: str,
                        offered: Mapping[str, Bot], say: _Say) -> str:
        made = await tx.of(RoomScheduleTables).make(room_id=line.room_id, bot=slug,
                                                    schedule=words.schedule_setting(schedule), ask=ask,
                                                    made_by=line.sender, made_in=line.event_id)
        if made is None:
            return await self._schedules(tx, line.room_id, offered, say)
        upcoming = next_after(schedule, made.now)
        said = say("scheduled", n=made.id, bot=offered[slug].name, when=words.schedule_words(schedule),
                   ask=ask, next=_when(upcoming) if upcoming else "never")
        return say.lines(said, await self._schedules(tx, line.room_id, offered, say))

    async def _schedules(self, tx: Tx, room_id: str, offered: Mapping[str, Bot], say: _Say) -> str:
        rows = await tx.of(RoomScheduleTables).in_room(room_id)
        if not rows:
            return say("no_schedules")
        entries = []
        for r in rows:
            bot = offered.get(r.bot)
            entries.append("- " + say("schedule_line", n=r.id, bot=bot.name if bot else r.bot,
                                      when=words.schedule_words(Schedule.model_validate(r.schedule)), ask=r.ask))
        return say.lines(say("schedules"), "\n".join(entries))

    async def _unschedule(self, tx: Tx, room_id: str, n: int, offered: Mapping[str, Bot], say: _Say) -> str:
        if not await tx.of(RoomScheduleTables).unschedule(n, room_id):
            here = [f"#{r.id}" for r in await tx.of(RoomScheduleTables).in_room(room_id)]
            return say("bad", field="n", value=str(n), allowed=", ".join(here) or "none", why="")
        return say.lines(say("unscheduled", n=n), await self._schedules(tx, room_id, offered, say))

    async def _runs(self, tx: Tx, room_id: str, offered: Mapping[str, Bot], say: _Say) -> str:
        rows = await tx.runs.latest_in_room(room_id, RUNS_SHOWN)
        if not rows:
            return say("no_runs")
        entries = []
        for r in rows:
            bot = offered.get(r.bot)
            ending = r.ending or ("answered" if r.status == "done" else r.status)
            entries.append("- " + say("run_line", run=r.id, bot=bot.name if bot else r.bot, ending=ending,
                                      cost=f"{r.cost_usd:.4f}", when=_when(r.created_at),
                                      asker=r.asked_by or "nobody"))
        return say.lines(say("runs"), "\n".join(entries))

    async def _spend(self, tx: Tx, room_id: str, offered: Mapping[str, Bot], say: _Say) -> str:
        rows = await tx.runs.spend_in_room(room_id)
        today = sum(r.today for r in rows)
        month = sum(r.month for r in rows)
        entries = []
        for r in rows:
            bot = offered.get(r.bot)
            entries.append("- " + say("spend_line", bot=bot.name if bot else r.bot, today=f"{r.today:.4f}",
                                      month=f"{r.month:.4f}"))
        return say.lines(say("spend", today=f"{today:.4f}", month=f"{month:.4f}"), "\n".join(entries))

    async def _cancel(self, tx: Tx, room_id: str, run: int, say: _Say) -> str:
        if not await tx.runs.cancel_one_in_room(run, room_id):
            unfinished = [str(r) for r in await tx.runs.unfinished_in_room(room_id)]
            return say("bad", field="run", value=str(run), allowed=", ".join(unfinished) or "none", why="")
        return say("cancelling", run=run)


class _Say:
    """The site's words for ``## bots / ### admin``; with none for a key, that part says nothing."""

    def __init__(self, registry: Registry) -> None:
        self._strings = registry.strings

    def __call__(self, key: str, **values: Any) -> str:
        text = self._strings.get(SECTION, key)
        return text.format(**values).strip() if text else ""

    @staticmethod
    def lines(*parts: str) -> str:
        return "\n\n".join(part for part in parts if part.strip())


def _offered(registry: Registry) -> dict[str, Bot]:
    """The bots a room may have: published (live) and offered on rooms."""
    return {slug: bot for slug, bot in registry.bots.items() if "rooms" in bot.surfaces}


def _about(bot: Bot) -> str:
    """A bot's one line: the first line of what its file says."""
    first = next((ln.strip() for ln in bot.body.splitlines() if ln.strip()), "")
    return first if len(first) <= ABOUT_CHARS else first[: ABOUT_CHARS - 1].rstrip() + "…"


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


MIN_PERIOD = dt.timedelta(minutes=15)
MAX_SCHEDULES = 20


def schedule_refusal(bot: Bot, schedule: Schedule, maker: AudienceFacts, existing: int) -> str | None:
    """Why a room admin may not set this schedule (None: they may)."""
    if not admits(bot.audience, maker):
        return f"{bot.name} is not yours to ask, so it cannot be asked on a timetable either"
    count, unit = schedule.period
    if unit in ("minute", "hour") and dt.timedelta(**{f"{unit}s": count}) < MIN_PERIOD:
        return f"a room schedule comes round at most every {int(MIN_PERIOD.total_seconds() // 60)} minutes"
    if existing >= MAX_SCHEDULES:
        return f"this room has {existing} schedules already (at most {MAX_SCHEDULES}); unschedule one first"
    return None
