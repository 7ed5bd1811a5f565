"""``!name args`` (or ``/name`` sent through as text): a command from ``content/commands`` (SPEC §5).

- A line is a command when, past a leading address to one of our users ("Helper: !summarise"), it
  is ``!name …`` and ``name`` is a command offered on ``rooms`` whose bot is joined here — or the line
  carries an MSC4332 ``m.bot.command`` block naming one. Anything else (``!word`` that is no command)
  is just a line: a bot it names is summoned, as for any line. One that names no bot and is close to a
  command the person may run here (``engine.core.typos``) is pointed at it ("did you mean"); anything
  further off is another bot's (``!hookshot help``) and gets silence. A line that names another bot is
  that bot's, not the command's.
- ``for:`` is checked against the sender by the room's power levels. A person it does not admit is
  answered as if the command did not exist — **withheld, never refused** (SPEC §3): it is absent from
  their ``!help`` and from the state clients draw, so a plain member never learns a moderator's
  command is there.
- A bot command asks its bot through ``asking`` (every refusal applies) with the prompt
  resolved here, and the name and arguments kept on the run's context, so a worker can resolve it
  afresh. A tool command runs its tool directly: a run of a bot in the room that has the tool (the one
  named, else the first by slug), whose one step is the tool called with the command's typed fields as its
  arguments — no model is asked (``engine.core.loop``) — under every refusal, ceiling and whose-data rule
  a summons has, its result said as the answer.
- A bad argument is answered by the command's bot as a notice replying to the line (in its thread),
  naming the field and what it accepts. ``!help`` lists what *this* person may run *here* and whom
  they may ask, answered by the service's own user (or, if it is not in the room, the first of our
  bots that is); with no provider it lists nothing and says why.
- What clients draw commands from (MSC4332 ``m.bot.commands`` state) is published by ``command_state``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from appservice.matrix.asking.asking import Asking
from appservice.matrix.claimers.msc4332 import COMMAND_BLOCKS, from_block
from appservice.matrix.claimers.service_voice import people_in, reply, speaker
from appservice.matrix.inbound.followups import Followup
from appservice.matrix.inbound.htmltext import person_link
from appservice.matrix.inbound.mentions import named_bots
from appservice.matrix.inbound.said import Line
from appservice.matrix.ours import Puppet
from appservice.matrix.power import facts_in_room
from appservice.matrix.tables.rooms import Room, RoomTables
from engine.content import AudienceFacts, Bot, Command, Registry, admits
from engine.content.command_words import describe_field, explain
from engine.content.commands import SECTION, Problem, args_json, parse_args, parse_command, strip_address
from engine.core.typos import meant
from engine.run.summon import LIVENESS_SECONDS
from engine.store import Tx

log = logging.getLogger(__name__)

HELP = "help"
CANCEL, BOTS = "cancel", "bots"  # the service's own, besides !help (cancels, admin)


class Commands:
    def __init__(self, registry: Callable[[], Registry], asking: Asking, *, server_name: str, service_user: str) -> None:
        self._registry = registry
        self.asking = asking
        self.server_name = server_name
        self.service_user = service_user

    async def claim(self, tx: Tx, line: Line, event: Mapping[str, Any], followups: list[Followup]) -> bool:
        """The order's "command" step: True when ``line`` was a command (run, or answered with why not)."""
        registry = self._registry()
        said = self._said(line, event, registry)
        if said is None:
            return False
        name, raw = said
        if name == HELP:
            await self._help(tx, line, registry)
            return True
        command = registry.commands.get(name)
        if command is None or not _in_rooms(command):
            return False
        room = await tx.of(RoomTables).get(line.room_id)
        if room is None or room.encrypted:
            return False
        people = await self._people(tx, line.room_id)
        facts = self._facts(room, line.sender)
        if not admits(command.audience, facts):
            log.info("%s may not run !%s here; withheld", line.sender, name, extra={"room": line.room_id})
            return False
        named = named_bots(line, self._puppets(registry))
        bot = self._runner(command, registry, people, named)
        if bot is None:
            return await self._no_runner(tx, line, command, registry, people, named)
        args = parse_args(command, raw, people=people, asker=line.sender, person_ref=person_link)
        if isinstance(args, Problem):
            words = explain(args, command, registry.strings)
            log.info("!%s from %s not taken: %s %s", name, line.sender, args.why, args.field,
                     extra={"room": line.room_id, "bot": bot.slug})
            if words:
                await self._reply(tx, line, bot.user_id, words)
            return True
        # The run keeps the name and the arguments; the worker resolves what it asks (command_prompt). The
        # run's prompt stays what the person said.
        context: dict[str, Any] = {"name": command.name, "args": args_json(args)}
        if command.bot is None:
            context["tool"] = command.tool  # run directly, with the fields as its arguments
        await self.asking.ask(tx, line, bot, extra_context={"command": context})
        return True

    async def typo(self, tx: Tx, line: Line, event: Mapping[str, Any], followups: list[Followup]) -> bool:
        """The order's "typo" step: a ``!word`` that is no command but close to one this person may run here: pointed at it, by whoever
        speaks for the service (True). Anything else — another bot's command (rooms have those), a command
        withheld from them or whose bot is not here, a line naming a bot — is left alone (False)."""
        registry = self._registry()
        said = self._said(line, event, registry)
        if said is None:
            return False
        given = said[0]
        if given in registry.commands or named_bots(line, self._puppets(registry)):
            return False  # withheld, not here, or a bot's to answer: never hinted at
        room = await tx.of(RoomTables).get(line.room_id)
        if room is None or room.encrypted:
            return False
        people = await self._people(tx, line.room_id)
        names = [c.name for c in runnable(registry, self._facts(room, line.sender), people)]
        names += [HELP, CANCEL] + ([BOTS] if self.service_user in people else [])
        command = meant(given, names)
        where = {"room": line.room_id, "asker": line.sender}
        if command is None:
            log.debug("!%s from %s is no command of ours, nor close to one; left alone", given, line.sender,
                      extra=where)
            return False
        log.debug("!%s from %s is no command; close to !%s", given, line.sender, command, extra=where)
        words = registry.strings.get(SECTION, "did_you_mean")
        sender = self._speaker(registry, people)
        if not words or sender is None:
            return False
        await self._reply(tx, line, sender, words.format(given=given, command=command))
        return True

    # --- reading the line --------------------------------------------------------------------------

    def _said(self, line: Line, event: Mapping[str, Any],
              registry: Registry) -> tuple[str, str | dict[str, str]] | None:
        content = event.get("content")
        if isinstance(content, Mapping):
            for key in COMMAND_BLOCKS:
                block = from_block(content.get(key))
                if block is not None:
                    return block
        # Pills as user ids, so a person argument given as a pill reads as who it points at.
        text = line.text_with_ids or line.text
        names = [self.service_user, *(n for b in registry.bots.values() for n in (b.user_id, b.name))]
        return parse_command(strip_address(text, names))

    def _puppets(self, registry: Registry) -> list[Puppet]:
        return [Puppet(b.user_id, b.name) for b in registry.bots.values()]

    def _runner(self, command: Command, registry: Registry, people: Mapping[str, str | None],
                named: Sequence[str]) -> Bot | None:
        """The bot that runs ``command`` here: its own (joined, and named if any bot is), or for a tool
        command a joined bot that has the tool (the one named, else the first)."""
        here = [b for b in registry.bots.values() if b.user_id in people and "rooms" in b.surfaces]
        if command.bot is not None:
            candidates = [b for b in here if b.slug == command.bot]
        else:
            candidates = [b for b in here if command.tool in b.tools]
        if named:
            candidates = [b for b in candidates if b.user_id in named]
        return candidates[0] if candidates else None

    async def _no_runner(self, tx: Tx, line: Line, command: Command, registry: Registry,
                         people: Mapping[str, str | None], named: Sequence[str]) -> bool:
        """No bot here runs it. A line naming another bot is that bot's (a mention summons it); a bot
        command whose bot is not here is just a line; a tool command is told there is none."""
        if named or command.tool is None:
            return False
        words = registry.strings.get(SECTION, "tool_no_bot")
        sender = self._speaker(registry, people)
        if words and sender:
            await self._reply(tx, line, sender, words.format(command=command.name, tool=command.tool))
        return True

    async def _people(self, tx: Tx, room_id: str) -> dict[str, str | None]:
        return await people_in(tx, room_id)

    def _facts(self, room: Room, user_id: str) -> AudienceFacts:
        # The sender spoke in the room, so they are in it (as a mention reads them).
        return facts_in_room(user_id, room, self.server_name)

    def _speaker(self, registry: Registry, people: Mapping[str, str | None]) -> str | None:
        return speaker(registry, self.service_user, people)

    async def _reply(self, tx: Tx, line: Line, sender: str, text: str) -> None:
        await reply(tx, line, sender, text, kind="cmd")

    # --- !help -------------------------------------------------------------------------------------

    async def _help(self, tx: Tx, line: Line, registry: Registry) -> None:
        room = await tx.of(RoomTables).get(line.room_id)
        if room is None or room.encrypted:
            return
        people = await self._people(tx, line.room_id)
        sender = self._speaker(registry, people)
        if sender is None:
            log.info("!help in a room none of ours is in", extra={"room": line.room_id})
            return
        usable = await tx.workers.provider_usable(LIVENESS_SECONDS)
        text = help_text(registry, self._facts(room, line.sender), people, usable=usable)
        if text:
            await self._reply(tx, line, sender, text)


def help_text(registry: Registry, facts: AudienceFacts, people: Mapping[str, str | None], *,
              usable: bool) -> str | None:
    """What ``facts``' person may run and whom they may ask in a room of ``people``, in the site's
    words. With no provider nothing can answer, so nothing is listed and it says why."""
    strings = registry.strings
    if not usable:
        return strings.get(SECTION, "help_no_provider")
    bots = _askable_here(registry, facts, people)
    commands = runnable(registry, facts, people)
    parts: list[str] = []
    heading = strings.get(SECTION, "help_commands")
    if commands and heading:
        lines = [heading, ""]
        for command in commands:
            lines.append(f"- **!{command.name}**" + (f" — {command.hint}" if command.hint else ""))
            lines.extend(f"  - {field}" for arg in command.args if (field := describe_field(arg, strings)))
        parts.append("\n".join(lines))
    whom = strings.get(SECTION, "help_bots")
    askable = [b for b in bots if b.hears_mentions]  # "mention one": only a bot a mention summons
    if askable and whom:
        parts.append(whom.format(bots=", ".join(b.name for b in askable)))
    if not parts:
        return strings.get(SECTION, "help_nothing")
    return "\n\n".join(parts)


def _askable_here(registry: Registry, facts: AudienceFacts, people: Mapping[str, str | None]) -> list[Bot]:
    return [b for b in registry.bots.values()
            if b.user_id in people and "rooms" in b.surfaces and admits(b.audience, facts)]


def runnable(registry: Registry, facts: AudienceFacts, people: Mapping[str, str | None]) -> list[Command]:
    """The commands ``facts``' person may run in a room of ``people``: offered in rooms, admitted, and run by
    a bot of theirs that is here."""
    bots = _askable_here(registry, facts, people)
    return [c for c in registry.commands.values()
            if _in_rooms(c) and admits(c.audience, facts)
            and any(c.bot == b.slug or (c.tool is not None and c.tool in b.tools) for b in bots)]


def puppet_commands(registry: Registry, bot: Bot, facts: AudienceFacts) -> list[Command]:
    """The commands ``bot`` answers in rooms that the person ``facts`` describes may run."""
    return [c for c in registry.commands.values()
            if _in_rooms(c) and admits(c.audience, facts)
            and (c.bot == bot.slug or (c.tool is not None and c.tool in bot.tools))]


def _in_rooms(command: Command) -> bool:
    return "rooms" in (command.surfaces or ())
