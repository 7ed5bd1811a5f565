"""Commands on the desk (SPEC §5): a contact runs a command from ``content/commands`` that is offered on the
desk (``surfaces: [desk]``), from the widget's menu, its fields sent apart as typed values.

- What a contact may run here: a command on the desk whose ``for:`` admits them and whose bot works this inbox
  (for a tool command, a bot of the inbox that has the tool) and may be asked by them. One they may not run is
  answered as if it did not exist — withheld, never refused. With no usable provider nothing is listed.
- Its fields are read by the engine's own argument typing (``parse_args``, as named values); one that does not
  fit is refused in the site's words (``explain``), naming the field and what it takes.
- Running it says it in the contact's name (``/name field=value …``, the command kept on the message), so the
  staff see it in the conversation as any line; its bot becomes the conversation's bot (the contact chose it,
  as they choose an offered one) and is asked with the command on its run's context — the worker resolves the
  prompt, or runs the tool directly — so its answer arrives as any bot answer. Not after a person has the
  conversation: then no bot starts there.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Mapping
from typing import Any

from appservice.desk import rules
from appservice.desk.asking import contact_facts, contact_name
from appservice.desk.changes import Where
from appservice.desk.desk import Desk, state_of
from appservice.desk.errors import RequestRefused
from appservice.desk.tables import Contact, Message
from engine.content import AudienceFacts, Bot, Command, Registry, admits
from engine.content.command_words import accepts, explain
from engine.content.commands import Problem, args_json, parse_args, span_text
from engine.content.parts import parse_span
from engine.run.summon import LIVENESS_SECONDS
from engine.store import Families, Tx

log = logging.getLogger(__name__)

SURFACE = "desk"


def on_desk(command: Command) -> bool:
    return SURFACE in (command.surfaces or ())


def command_line(name: str, args: Mapping[str, Any]) -> str:
    """The command as the contact's line reads, as it could be typed again: ``/recap since=2d urgent=true``
    (a value with spaces quoted)."""
    given = []
    for key, value in args.items():
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        given.append(f'{key}="{text}"' if " " in text else f"{key}={text}")
    return " ".join([f"/{name}", *given])


class DeskCommands:
    def __init__(self, desk: Desk, registry: Callable[[], Registry]) -> None:
        self.desk = desk
        self._registry = registry

    def _bots(self, inbox_id: int) -> list[Bot]:
        """The bots on the desk that work this inbox (its own list, else every desk bot), by slug."""
        inbox = self.desk.inboxes.get(inbox_id)
        only = inbox.settings.bots if inbox is not None else ()
        bots = [b for b in self._registry().bots.values() if SURFACE in b.surfaces]
        return sorted((b for b in bots if only is None or b.slug in only), key=lambda b: b.slug)

    def _runner(self, command: Command, bots: list[Bot], facts: AudienceFacts) -> Bot | None:
        """The bot that runs ``command`` for this contact: its own, or for a tool command the first that has it."""
        mine = [b for b in bots if admits(b.audience, facts)]
        if command.bot is not None:
            return next((b for b in mine if b.slug == command.bot), None)
        return next((b for b in mine if command.tool in b.tools), None)

    async def runnable(self, db: Families, contact: Contact) -> list[tuple[Command, Bot]]:
        """What ``contact`` may run here, each with the bot that runs it; nothing with no usable provider."""
        assert contact.inbox_id is not None
        if not await db.workers.provider_usable(LIVENESS_SECONDS):
            return []
        facts = await contact_facts(db, contact, self.desk.server_name, private=True)
        bots = self._bots(contact.inbox_id)
        found = []
        for command in sorted(self._registry().commands.values(), key=lambda c: c.name):
            bot = self._runner(command, bots, facts) if on_desk(command) and admits(command.audience, facts) else None
            if bot is not None:
                found.append((command, bot))
        return found

    def shape(self, command: Command) -> dict[str, Any]:
        """A command as the widget draws it: its name, hint and fields, each with its kind (the control), its
        label, default (a span's as it is typed: ``1d``), choices, and what it accepts in the site's words."""
        shaped = command.shape()
        strings = self._registry().strings
        for field, arg in zip(shaped["args"], command.args, strict=True):
            field["accepts"] = accepts(arg, strings) or ""
            span = parse_span(str(arg.default)) if arg.kind == "span" and arg.default is not None else None
            if isinstance(span, dt.timedelta):
                field["default"] = span_text(span)
        return shaped

    async def run(self, tx: Tx, where: Where, name: str, values: Mapping[str, str]) -> Message:
        """The contact runs command ``name`` with ``values`` (its fields by name, as text): said in their name,
        its bot asked. Refused out loud when it cannot run; nothing is said or started then."""
        found = dict((c.name, (c, b)) for c, b in await self.runnable(tx, where.contact))
        if name not in found:
            log.info("desk contact %s ran /%s, which is not theirs to run here; withheld", where.contact.id, name,
                     extra={"room": where.key})
            raise RequestRefused(404, "no such command")
        command, bot = found[name]
        state = state_of(where.conversation)
        if state.people_have_it:
            raise RequestRefused(409, self.desk.words("commands_off"))
        args = parse_args(command, values, people={}, asker=where.contact_key)
        registry = self._registry()
        if isinstance(args, Problem):
            log.info("/%s from contact %s not taken: %s %s", name, where.contact.id, args.why, args.field,
                     extra={"room": where.key, "bot": bot.slug})
            raise RequestRefused(422, explain(args, command, registry.strings) or "")
        await self.desk.pace(tx, where)
        kept = args_json(args)
        message = await self.desk.say(
            tx, where, message_type="incoming", content=command_line(name, kept), sender_type="contact",
            sender_name=contact_name(where.contact, registry), attributes={"command": {"name": name, "args": kept}})
        where = await self.desk.become(tx, where, rules.chosen(rules.written(state), bot.slug), cause="wrote")
        context: dict[str, Any] = {"name": command.name, "args": kept}
        if command.bot is None:
            context["tool"] = command.tool  # run directly, with the fields as its arguments
        log.info("desk contact %s ran /%s", where.contact.id, name, extra={"room": where.key, "bot": bot.slug})
        await self.desk.asking.ask(tx, where, bot, [message], asked=True, command=context)
        return message
