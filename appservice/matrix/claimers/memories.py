"""A person's own memories in Matrix (SPEC §11): ``!memories`` lists what they told a ``person+recall`` bot,
newest first and numbered; ``!forget <n>`` removes the n-th of that list, ``!forget all`` every one of theirs for
that bot. Only the sender's own rows are ever read or removed (the person is the line's sender, whom the
homeserver vouched for), and only where the sender alone reads the answer (a DM with the bot): listed in a room
others read, their memories would be said to everybody there. The bot is the one named after the command, else
the only ``person+recall`` bot in the room. Nothing here writes a memory: only the worker does, after an answer.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from typing import Any

from appservice.matrix.delivery.render import answer_content
from appservice.matrix.inbound.followups import Followup
from appservice.matrix.inbound.said import Line
from appservice.matrix.ours import Ours
from appservice.matrix.power import facts_now
from appservice.matrix.tables.outbox import OutboxTables
from appservice.matrix.tables.rooms import RoomTables
from engine.content import Bot, Registry
from engine.core.memory import uses_recall
from engine.store import Tx

log = logging.getLogger(__name__)

_COMMAND = re.compile(r"^!(memories|forget)(?:\s+(all|\d{1,6}))?(?:\s+@?(\S+))?\s*$", re.IGNORECASE)
LISTED = 50  # at most this many are listed (and so may be forgotten by number)
SHOWN_CHARS = 200
# Words when the site's strings have none.
WORDS = {
    "list": "What you told {bot}, newest first (`!forget <n>` removes one, `!forget all` every one):",
    "none": "{bot} remembers nothing you told it.",
    "forgot": "{bot} has forgotten: {said}",
    "forgot_all": "{bot} has forgotten everything you told it ({count}).",
    "no_such": "There is no memory {n}: `!memories` lists them, numbered.",
    "not_here": "I list and forget your memories only in our direct messages, where you alone read them.",
    "which": "Which bot? Say `!memories <bot>` — {bots}.",
}


class MemoryCommands:
    def __init__(self, registry: Callable[[], Registry], ours: Ours, *, server_name: str,
                 service_user: str | None) -> None:
        self._registry = registry
        self.ours = ours
        self.server_name = server_name
        self.service_user = service_user

    def _words(self, key: str) -> str:
        return self._registry().strings.get("memories", key) or WORDS[key]

    async def claim(self, tx: Tx, line: Line, event: Mapping[str, Any], followups: list[Followup]) -> bool:
        """The order's "memories" step: True when ``line`` is ``!memories`` or ``!forget …`` (answered here)."""
        match = _COMMAND.match(line.text.strip())
        if match is None:
            return False
        verb, which, named = match.group(1).lower(), match.group(2), match.group(3)
        if verb == "forget" and which is None:
            return False  # not ours: `!forget` alone names nothing to forget
        bots = await self._recalling_here(tx, line.room_id)
        bot = self._named(named, bots) if named else (bots[0] if len(bots) == 1 else None)
        if bot is None:
            if bots:
                await self._say(tx, line, bots[0], self._words("which").format(
                    bots=", ".join(f"`{b.slug}`" for b in bots)))
            return True
        facts = await facts_now(tx, line.room_id, line.sender, server_name=self.server_name,
                                service_user=self.service_user, puppet_prefix=self.ours.puppet_prefix)
        if not facts.private:
            await self._say(tx, line, bot, self._words("not_here"))
            return True
        listed = await tx.memories.of(line.sender, bot.slug, LISTED)
        if verb == "memories":
            if not listed:
                text = self._words("none").format(bot=bot.name)
            else:
                items = [f"{n}. {m.said[:SHOWN_CHARS]}{'…' if len(m.said) > SHOWN_CHARS else ''} ({m.at:%Y-%m-%d})"
                         for n, m in enumerate(listed, start=1)]
                text = "\n".join([self._words("list").format(bot=bot.name), "", *items])
        elif which == "all":
            count = await tx.memories.forget_all(line.sender, bot.slug)
            text = self._words("forgot_all").format(bot=bot.name, count=count)
        else:
            n = int(which or 0)
            if not 1 <= n <= len(listed) or not await tx.memories.forget(line.sender, bot.slug, listed[n - 1].id):
                text = self._words("no_such").format(n=n)
            else:
                text = self._words("forgot").format(bot=bot.name, said=listed[n - 1].said[:SHOWN_CHARS])
        log.info("%s: %s for %s", line.sender, verb, bot.slug, extra={"room": line.room_id, "bot": bot.slug})
        await self._say(tx, line, bot, text)
        return True

    async def _recalling_here(self, tx: Tx, room_id: str) -> list[Bot]:
        """The person+recall bots whose puppets read the room."""
        readers = {r.user_id for r in await tx.of(RoomTables).readers(room_id)}
        return [b for b in self._registry().bots.values() if uses_recall(b.memory) and b.user_id in readers]

    @staticmethod
    def _named(name: str, bots: list[Bot]) -> Bot | None:
        wanted = name.lower()
        return next((b for b in bots if wanted in (b.slug.lower(), b.name.lower(), b.user_id.lower())), None)

    async def _say(self, tx: Tx, line: Line, bot: Bot, text: str) -> None:
        content = answer_content(text, thread_root=line.thread_root, reply_to=line.event_id, mention=line.sender)
        await tx.of(OutboxTables).enqueue(txn_id=f"memories.{line.event_id}", room_id=line.room_id, sender=bot.user_id,
                                event_type="m.room.message", content=content)
