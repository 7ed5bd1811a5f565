"""The door as a surface (``engine.surface``): the runs asked through it are on the ``voice`` surface.

- ``facts``: who the person is where the session is. Bound to a room, the room says it (its power levels and
  members, as the Matrix surface reads them), and the place is private only when the room is theirs alone.
  Bound to nothing, it is their own voice session, private only when its front end said it is one-to-one (the
  grant's ``one_to_one``): what is said aloud may be heard by whoever is near.
- ``deliver``: in the run's finishing commit, the turn is marked handed over and the door's listeners woken
  (``NOTIFY`` at commit), whichever process holds the response. A turn whose response gave up waiting has
  outlived it: its answer is posted to Matrix instead — to the room it was asked from when the person and the
  bot are both still joined there (re-checked now, from our state), otherwise to the person's DM with the bot.
- ``working`` and ``published``: nothing to show (the stream's keep-alives say it is working).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from appservice.door.tables import DoorTables
from appservice.matrix.delivery.render import answer_content
from appservice.matrix.ours import PUPPET_PREFIX
from appservice.matrix.power import facts_now
from appservice.matrix.tables.outbox import OutboxTables
from appservice.matrix.tables.rooms import RoomTables
from engine.content import Registry
from engine.content.audience import AudienceFacts
from engine.core.messages import ENDINGS
from engine.core.redact import redact
from engine.store import Families, Tx
from engine.surface import Answered, Outcome, RunInfo

log = logging.getLogger(__name__)

SURFACE = "voice"


def answer_txn(run_id: int) -> str:
    return f"summon.door{run_id}.answer"


class DoorSurface:
    name = SURFACE

    def __init__(self, registry: Callable[[], Registry], *, server_name: str, service_user: str | None,
                 puppet_prefix: str = PUPPET_PREFIX) -> None:
        self._registry = registry
        self.server_name = server_name
        self.service_user = service_user
        self.puppet_prefix = puppet_prefix

    async def facts(self, db: Families, room_id: str | None, user_id: str | None, *,
                    site_classes: frozenset[str] = frozenset()) -> AudienceFacts:
        if room_id is None:
            # No room: theirs alone only when the front end said the session is one-to-one (a speakerphone in a
            # kitchen is no DM).
            alone = user_id is not None and await db.of(DoorTables).alone(user_id)
            return AudienceFacts(user_id=user_id, local_server=self.server_name, site_classes=site_classes,
                                 private=alone)
        return await facts_now(db, room_id, user_id, server_name=self.server_name, service_user=self.service_user,
                               site_classes=site_classes, puppet_prefix=self.puppet_prefix)

    async def working(self, run: RunInfo, on: bool) -> None:
        return None

    async def published(self, registry: Registry) -> None:
        return None

    async def deliver(self, tx: Tx, run: RunInfo, outcome: Outcome) -> None:
        finished = await tx.of(DoorTables).finish_turn(run.id)
        if finished is None:
            log.error("run %s is on the door's surface but is no door turn; nothing to hand it to", run.id,
                      extra={"run": run.id, "bot": run.bot})
            return
        await tx.of(DoorTables).notify(run.id)
        if finished.waiting:
            return  # the response waiting for it gives it (in this process or another)
        text = self.words_of(run.bot, outcome)
        if not text:
            log.info("run %s outlived its turn and ended with nothing to say", run.id, extra={"run": run.id})
            return
        bot = self._registry().get(run.bot)
        person = run.asked_by
        if bot is None or person is None:
            log.error("run %s outlived its turn, but its bot or its person is gone", run.id, extra={"run": run.id})
            return
        room = await self.where_to_post(tx, finished.origin_room, person, bot.user_id)
        if room is None:
            log.warning("run %s outlived its turn and %s has no room with %s to post it in; it stays on the run",
                        run.id, person, bot.slug, extra={"run": run.id, "bot": bot.slug})
            return
        await tx.of(OutboxTables).enqueue(txn_id=answer_txn(run.id), room_id=room, sender=bot.user_id,
                                event_type="m.room.message", run_id=run.id,
                                content=answer_content(text, thread_root=None, reply_to=None, mention=person))
        await tx.of(DoorTables).posted(run.id, room)
        log.info("run %s outlived its turn: posted to %s", run.id, room, extra={"run": run.id, "room": room})

    def words_of(self, slug: str, outcome: Outcome) -> str:
        """What the person is told: the answer, or the ending in the bot's words with the reason (the
        provider's own sentence, links and keys taken out) — the person asking is the only one who hears it."""
        if isinstance(outcome, Answered):
            return outcome.text
        words = self.ending_words(slug, outcome.ending)
        if not words:
            return ""
        reason = redact(outcome.reason) if outcome.reason else ""
        return f"{words}\n\n{reason}" if reason else words

    def ending_words(self, slug: str, ending: str | None) -> str:
        """An ending in the bot's words ("" with none: with no words the bot says nothing)."""
        bot = self._registry().get(slug)
        if bot is None or ending not in ENDINGS:
            return ""
        return bot.ending(ending) or ""

    async def where_to_post(self, db: Families, origin: str | None, person: str, puppet: str) -> str | None:
        """Where work that outlived its turn is posted: the room it was asked from, when the person and the bot
        are both still joined there (re-checked now); otherwise the person's DM with the bot (a room of theirs
        alone with it); None when there is neither."""
        if origin is not None and await self.both_joined(db, origin, person, puppet):
            return origin
        for room in await db.of(DoorTables).shared_rooms(person, puppet):
            if (await self.facts(db, room, person)).private:
                return room
        return None

    @staticmethod
    async def both_joined(db: Families, room_id: str, person: str, puppet: str) -> bool:
        """Whether the person and the bot are both joined to ``room_id``, a room we are in and can read, as our
        state says now."""
        room = await db.of(RoomTables).get(room_id)
        if room is None or room.encrypted or room.left_at is not None:
            return False
        for user in (person, puppet):
            member = await db.of(RoomTables).member(room_id, user)
            if member is None or member.membership != "join":
                return False
        return True
