"""The builder's tools (SPEC §10): ``create_bot`` and ``remove_bot``, offered only where the person the run
is about alone reads the answer (a DM with them, or their bot's own room: they are personal built-ins).

``create_bot`` builds in order, and nothing is half-made: validate (a mistake goes back to the model as a
line it can repair and relay) → discover the feeds of the sites the member named → **the dry run is the
gate**: the task runs once, now, as an ordinary run; if it fails, comes back empty or reached none of its
sources, nothing is created and the member is told why → the bot's own room (the owner and the builder's
puppet, named after the persona, the persona as the puppet's name there) → the charter stored, its clock
armed and the dry run posted as the **first edition**, in one commit. Given a ``bot_id`` it changes that
bot instead (its author or owner only), running the gate again when what it reads or does changed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from appservice.matrix.delivery.homeserver import Homeserver
from appservice.matrix.errors import MatrixError
from appservice.matrix.tables.outbox import OutboxTables
from appservice.matrix.tables.rooms import RoomTables
from appservice.members.book import Book, Kept
from appservice.members.charter import Charter, CharterRules, read_charter
from appservice.members.content import edition_content, notice
from appservice.members.edition import accepted_card, judge
from appservice.members.errors import CharterError, CharterRefused, CharterUnreadable
from appservice.members.feeds import Feeds
from appservice.members.runs import edition_summons, schedule_words
from appservice.members.tables import MemberTables
from engine.clock import Clock
from engine.content import Registry
from engine.core.messages import load_step
from engine.errors import StoreError, ToolError
from engine.run.refusals import Refused
from engine.run.summon import summon
from engine.store import Store
from engine.tools.base import RunRef, SideEffects, ToolFn

log = logging.getLogger(__name__)

NOT_HERE = "I can only make or change bots for the person I'm talking with, in a direct message with them."
FINISHED = ("done", "failed", "cancelled")
FIELDS = ("name", "glyph", "schedule", "prompt", "sources", "card")
# How long a persona name put back in a bot's room is taken as on its way (its event not yet seen) before it is
# asked for again.
RENAMED_SECONDS = 30.0


@dataclass(frozen=True)
class BuildSettings:
    host: str  # the builder's slug: member bots' runs are its runs, their clocks its clocks
    server_name: str
    rules: CharterRules
    admins: frozenset[str] = frozenset()
    max_per_person: int = 10
    dry_run_seconds: float = 180.0
    # Everything making or changing a bot may take before it is born: finding its feeds, then its dry run.
    create_seconds: float = 240.0


@dataclass(frozen=True)
class DryRun:
    charter_id: str  # the id it ran under, which the charter is stored under when it works
    ok: bool
    why: str
    text: str
    steps: list[Any]


class Builder:
    def __init__(self, store: Store, book: Book, feeds: Feeds, registry: Callable[[], Registry],
                 homeserver: Homeserver, clock: Clock, settings: BuildSettings) -> None:
        self.store = store
        self.book = book
        self.feeds = feeds
        self._registry = registry
        self.homeserver = homeserver
        self.clock = clock
        self.settings = settings
        # The persona names keep_faces asked for, by room: the name, when (this process's monotonic clock), and the
        # puppet's membership row as it stood then (its updated_at: any membership event stored since moves it).
        self._named: dict[str, tuple[str, float, datetime | None]] = {}

    def tools(self) -> dict[str, ToolFn]:
        return {"create_bot": SideEffects(self.create_bot), "remove_bot": SideEffects(self.remove_bot)}  # done once

    def _puppet(self) -> str:
        bot = self._registry().get(self.settings.host)
        if bot is None:
            raise ToolError("The builder is switched off here.")
        return bot.user_id

    async def _person(self, run: RunRef) -> str:
        subject = await self.store.people.subject(run.id)
        if subject is None or not subject.is_asker or subject.user_id is None:
            raise ToolError(NOT_HERE)
        return subject.user_id

    # --- create_bot ------------------------------------------------------------------------------------

    async def create_bot(self, run: RunRef, arguments: dict[str, Any]) -> str:
        person = await self._person(run)
        bot_id = arguments.get("bot_id")
        if isinstance(bot_id, str) and bot_id.strip():
            return await self._change(person, bot_id.strip(), arguments)
        owned = await self.store.of(MemberTables).owned_by(person)
        if len(owned) >= self.settings.max_per_person:
            raise ToolError(f"Nothing was made: you already have {len(owned)} bots, the most one person may keep "
                            "here. Remove one first.")
        until = self.clock.monotonic() + self.settings.create_seconds
        data = {key: arguments[key] for key in FIELDS if key in arguments and arguments[key] is not None}
        charter = self._charter(data, person, allow=())
        charter = await self._discovered(charter, until)
        dry = await self._dry_run(charter, until)
        if not dry.ok:
            raise ToolError(f"Nothing was made: its first edition {dry.why}. Tell them why, plainly.")
        return await self._birth(person, charter, dry)

    def _charter(self, data: dict[str, Any], person: str, *, allow: tuple[str, ...]) -> Charter:
        sources = data.get("sources") or []
        tools = ["fetch", "card"] if sources else ["card"]
        if data.get("card") is False:
            tools = [t for t in tools if t != "card"]
        try:
            return read_charter({**data, "tools": tools, "allow": list(allow), "owner": person, "author": person},
                                self.settings.rules)
        except ValueError as exc:
            raise ToolError(f"Nothing was made; fix these and call create_bot again: {exc}") from None

    def _left(self, until: float) -> float:
        return max(0.0, until - self.clock.monotonic())

    async def _discovered(self, charter: Charter, until: float) -> Charter:
        if not charter.sources:
            return charter
        found, problems = await self.feeds.discover(
            charter.sources, seconds=min(self.feeds.discover_seconds, self._left(until)))
        if not found:
            raise ToolError("Nothing was made: none of its sources could be reached — " + "; ".join(problems))
        allow = tuple(dict.fromkeys(url for f in found for url in f.allow))[:20]
        return charter.model_copy(update={"allow": allow})

    async def _dry_run(self, charter: Charter, until: float) -> DryRun:
        pending_id, pending = self.book.seal_pending(charter)
        registry = self._registry()
        async with self.store.transaction("member_dry_run") as tx:
            outcome = await summon(tx, registry, edition_summons(
                pending_id, charter, host=self.settings.host, local_server=registry.server_name, occurrence=None,
                dry_run=pending))
        if isinstance(outcome, Refused):
            return DryRun(pending_id, False, f"could not be run ({outcome.reason})", "", [])
        patience = min(self.settings.dry_run_seconds, self._left(until))
        waited = 0.0
        while True:
            row = await self.store.runs.get(outcome.run_id)
            if row is not None and row.status in FINISHED:
                break
            if waited >= patience:
                await self.store.of(MemberTables).cancel_run(outcome.run_id)
                return DryRun(pending_id, False, f"took longer than {patience:.3g}s", "", [])
            await self.clock.sleep(0.25)
            waited += 0.25
        steps = [load_step(p) for p in await self.store.runs.steps(outcome.run_id)]
        error = None if row.status == "done" and row.answer is not None else (row.reason or row.ending or row.status)
        verdict = judge(steps, row.answer, has_sources=bool(charter.fetches), error=error)
        log.info("dry run %s: %s", outcome.run_id, "ok" if verdict.ok else verdict.why, extra={"run": outcome.run_id})
        return DryRun(pending_id, verdict.ok, verdict.why, row.answer or "", steps)

    async def _birth(self, person: str, charter: Charter, dry: DryRun) -> str:
        puppet = self._puppet()
        try:
            room_id = await self.homeserver.create_room(
                puppet, name=charter.name, invite=[person],
                topic=f"{charter.glyph} {charter.name}: posts {schedule_words(charter)}. Made by asking; "
                      "talk to it here to change it.")
        except MatrixError as exc:
            log.error("member bot room could not be made: %s", exc)
            raise ToolError("Nothing was made: its room could not be created on the homeserver; try again "
                            "later.") from None
        try:
            await self.homeserver.set_state_event(puppet, room_id, "m.room.member", puppet,
                                                  {"membership": "join", "displayname": charter.name})
            # Their room: theirs to name and to run, as any room they made would be.
            levels = await self.homeserver.state_event(puppet, room_id, "m.room.power_levels", "") or {}
            users = {**(levels.get("users") or {}), person: 100}
            await self.homeserver.set_state_event(puppet, room_id, "m.room.power_levels", "", {**levels, "users": users})
        except MatrixError as exc:
            log.error("member bot room %s could not be set up: %s", room_id, exc)
            await self._abandon(puppet, room_id)
            raise ToolError("Nothing was made: its room could not be set up on the homeserver; try again "
                            "later.") from None
        charter = charter.model_copy(update={"room_id": room_id})
        try:
            async with self.store.transaction("member_bot_born") as tx:
                now = await tx.schedules.now()
                charter_id = await self.book.create(tx, charter, by=person, clock_at=now, host=self.settings.host,
                                                    charter_id=dry.charter_id)
                await tx.of(OutboxTables).enqueue(txn_id=f"summon.member.{charter_id}.first", room_id=room_id, sender=puppet,
                                        event_type="m.room.message",
                                        content=edition_content(dry.text, accepted_card(dry.steps)))
        except CharterError as exc:
            await self._abandon(puppet, room_id)
            raise ToolError(f"Nothing was made: {exc}") from None
        except Exception:
            await self._abandon(puppet, room_id)
            raise
        log.info("member bot %s born in %s", charter_id, room_id, extra={"charter": charter_id, "room": room_id})
        return (f"Made {charter.glyph} {charter.name} (bot_id {charter_id}). Its own room, \"{charter.name}\", has "
                f"its first edition; it posts {schedule_words(charter)} and reads {_sites(charter)}. Tell them to "
                "accept the room's invite.")

    async def _abandon(self, puppet: str, room_id: str) -> None:
        """No room without a charter: the one made for a bot that could not be stored is left."""
        try:
            await self.homeserver.leave(puppet, room_id, reason=self._registry().strings.get("members", "not_made"))
        except MatrixError:
            log.warning("could not leave %s after its bot failed to be stored", room_id)

    # --- changing and removing -----------------------------------------------------------------------

    async def _theirs(self, person: str, bot_id: str) -> Kept:
        try:
            kept = await self.book.read(self.store, bot_id)
        except CharterError as exc:
            log.error("member bot %s: %s", bot_id, exc)
            raise ToolError(f"Bot {bot_id} cannot be read; it can only be removed.") from None
        if kept is None:
            raise ToolError(f"There is no bot {bot_id}.")
        if person not in (kept.charter.owner, kept.charter.author):
            raise ToolError("That bot is not theirs to change.")
        return kept

    async def _change(self, person: str, bot_id: str, arguments: dict[str, Any]) -> str:
        kept = await self._theirs(person, bot_id)
        old = kept.charter
        changes = {key: arguments[key] for key in FIELDS if key in arguments and arguments[key] is not None}
        merged = {**old.model_dump(mode="json", include=set(FIELDS)), **changes}
        charter = self._charter(merged, old.owner, allow=old.allow)
        charter = charter.model_copy(update={"author": old.author, "room_id": old.room_id})
        until = self.clock.monotonic() + self.settings.create_seconds
        gated = ("sources" in changes and tuple(changes["sources"] or ()) != old.sources) or "prompt" in changes
        if "sources" in changes and tuple(changes["sources"] or ()) != old.sources:
            charter = await self._discovered(charter.model_copy(update={"allow": ()}), until)
        if gated:
            dry = await self._dry_run(charter, until)
            if not dry.ok:
                raise ToolError(f"Nothing was changed: with that change its edition {dry.why}.")
        try:
            async with self.store.transaction("member_bot_changed") as tx:
                await self.book.overwrite(tx, bot_id, charter, by=person)
        except CharterRefused as exc:
            raise ToolError(f"Nothing was changed: {exc}.") from None
        renamed = await self._rename(old, charter)
        said = [f"Changed {charter.glyph} {charter.name} (bot_id {bot_id}): it posts {schedule_words(charter)}"]
        if charter.sources:
            said.append(f"reads {_sites(charter)}")
        if renamed:
            said.append("its room is renamed too")
        return "; ".join(said) + "."

    async def _rename(self, old: Charter, new: Charter) -> bool:
        """A new persona renames the bot's room — unless a person renamed the room by hand — and the builder's
        name there."""
        if old.name == new.name or new.room_id is None:
            return False
        puppet = self._puppet()
        try:
            await self.homeserver.set_state_event(puppet, new.room_id, "m.room.member", puppet,
                                                  {"membership": "join", "displayname": new.name})
            current = await self.homeserver.state_event(puppet, new.room_id, "m.room.name", "")
            if isinstance(current, dict) and current.get("name") not in (None, old.name):
                return False  # somebody named the room themselves: their name stays
            await self.homeserver.set_state_event(puppet, new.room_id, "m.room.name", "", {"name": new.name})
        except MatrixError as exc:
            log.warning("could not rename member bot room %s: %s", new.room_id, exc)
            return False
        return True

    async def remove_bot(self, run: RunRef, arguments: dict[str, Any]) -> str:
        person = await self._person(run)
        bot_id = arguments.get("bot_id")
        if not isinstance(bot_id, str) or not bot_id.strip():
            raise ToolError('remove_bot needs {"bot_id": "…"}: the id its maker was told.')
        bot_id = bot_id.strip()
        try:
            kept = await self.book.read(self.store, bot_id)
        except CharterError:
            kept = None  # unreadable: still removable by its author, owner or an admin (checked on the row)
        try:
            async with self.store.transaction("member_bot_removed") as tx:
                gone = await self.book.remove(tx, bot_id, by=person, admin=person in self.settings.admins)
                if gone and kept is not None and kept.charter.room_id is not None:
                    await tx.of(OutboxTables).enqueue(
                        txn_id=f"summon.member.{bot_id}.removed", room_id=kept.charter.room_id, sender=self._puppet(),
                        event_type="m.room.message",
                        content=notice((self._registry().strings.get("members", "removed") or "{name}").format(
                            name=f"{kept.charter.glyph} {kept.charter.name}")))
        except CharterRefused as exc:
            raise ToolError(f"Nothing was removed: {exc}.") from None
        if not gone:
            raise ToolError(f"There is no bot {bot_id}.")
        name = f"{kept.charter.glyph} {kept.charter.name}" if kept is not None else bot_id
        return f"Removed {name}: it posts no more; its room and history stay."

    # --- the persona in each bot's room ------------------------------------------------------------------

    async def keep_faces(self) -> int:
        """Give the builder's puppet its persona's name again in every member bot's room where the homeserver
        took it away; how many it renamed.

        A change to the puppet's own profile (its avatar set or redrawn, its name) is carried by the homeserver
        into every room it is in, some time later, as a fresh membership with the global name — which would
        leave each bot's room showing "Builder". The name each room last showed is what the dispatcher recorded
        from those very events, so each tick compares it with the persona and puts back what was stomped. One
        room that fails is logged and the others go on."""
        bot = self._registry().get(self.settings.host)
        if bot is None:
            return 0
        puppet = bot.user_id
        fixed = 0
        try:
            ids = await self.store.of(MemberTables).ids()
        except StoreError as exc:
            log.warning("could not read the member bots to name the builder in their rooms: %s", exc)
            return 0
        now = self.clock.monotonic()
        for charter_id in ids:
            try:
                row = await self.store.of(MemberTables).get(charter_id)
                charter = self.book.unseal(row).charter if row is not None else None
                if charter is None or charter.room_id is None:
                    continue
                member = await self.store.of(RoomTables).member(charter.room_id, puppet)
                if member is not None and member.display_name == charter.name:
                    self._named.pop(charter.room_id, None)  # named as it should be (what was asked has arrived)
                    continue
                if member is None or member.membership != "join":
                    continue  # left (or was removed from) the room: nothing to name there
                asked = self._named.get(charter.room_id)
                if (asked is not None and asked[0] == charter.name and asked[2] == member.updated_at
                        and now - asked[1] < RENAMED_SECONDS):
                    continue  # asked for just now, and no membership of the puppet has arrived since: on its way
                # (One has arrived and it is not the persona: ours came and another stomp followed it before a
                # tick saw ours, or the homeserver's came after ours. Either way: ask again now.)
                await self.homeserver.set_state_event(puppet, charter.room_id, "m.room.member", puppet,
                                                      {"membership": "join", "displayname": charter.name})
                self._named[charter.room_id] = (charter.name, now, member.updated_at)
                fixed += 1
            except CharterUnreadable as exc:
                log.error("member bot skipped: %s", exc, extra={"charter": charter_id})
            except (MatrixError, StoreError) as exc:
                log.warning("member bot %s: could not give the builder its name in its room: %s", charter_id, exc,
                            extra={"charter": charter_id})
        if fixed:
            log.info("the builder's puppet is named after its bot again in %d member bot room(s)", fixed)
        return fixed


def _sites(charter: Charter) -> str:
    """What a bot reads, as its result says it: a count, never the sites (the charter's words stay sealed; the
    person said them, and the model has their words)."""
    n = len(charter.sources)
    return "nothing from the web" if n == 0 else f"the {n} site{'s' if n > 1 else ''} they named"
