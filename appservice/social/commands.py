"""``!rules …``: staff writing and changing social rules (SPEC §14), in ``!bots``'s grammar and with its refusals.

- **Where**: in a bridged room (``!rules`` lists that room's rules and says what the room is; ``add`` writes one
  for it), or in the review place (the staff room), which governs several: there ``!rules`` lists every rule,
  ``add … in <room id>`` writes one for that bridged room, and a rule is paused, resumed, removed, switched to
  sending automatically or asked for its history by its number.
- **Who**: someone with the configured power (``social.power``, a moderator by default) in the room that governs
  the rule — the bridged room it was written in, or the review room.
  Anyone else is told, in one line, the level it needs — never silence.
- **What is refused, in words, with nothing stored**: an empty phrase, one that would match nearly every line, an
  unknown bot, a bot not published for the social surface or not allowed to answer a guest, a kind of line the
  room does not have, and a destination that is not where such a line is said (a DM is answered privately, a
  comment publicly: each destination is its own answer).
- A rule starts drafting for review; ``auto <id> on`` switches automatic sending on, explicitly, and every list
  says so beside the rule. Every change is a row of the rule's history (``!rules history <id>``).
- Writing a rule invites its bot into the room (it replies there as itself), as ``!bots add`` does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC

from appservice.matrix.claimers.admin_words import Bad
from appservice.matrix.delivery.render import answer_content
from appservice.matrix.inbound.followups import Followup, InvitePuppet
from appservice.matrix.inbound.said import Line
from appservice.matrix.power import standing_in
from appservice.matrix.tables.outbox import OutboxTables
from appservice.matrix.tables.rooms import RoomTables
from appservice.social import words
from appservice.social.authority import may_answer_guest
from appservice.social.bridged import LINE_KINDS
from appservice.social.kind import NAME
from appservice.social.say import Say
from appservice.social.tables import Bridged, Rule, SocialTables
from engine.content import Registry
from engine.store import Tx

log = logging.getLogger(__name__)
LISTED = 50
HISTORY_SHOWN = 15
# Where a line of each kind is answered: the one destination it has.
DESTINATION = {"dm": "private", "comment": "public", "group": "public"}


class RulesCommands:
    def __init__(self, registry: Callable[[], Registry], *, staff_room: str, level: int, server_name: str,
                 service_user: str) -> None:
        self._registry = registry
        self.staff_room = staff_room
        self.level = level
        self.server_name = server_name
        self.service_user = service_user

    async def claim(self, tx: Tx, line: Line, followups: list[Followup]) -> bool:
        """True when ``line`` was a ``!rules …`` for the service here (carried out, or refused out loud)."""
        if not words.is_rules_line(line.text):
            return False
        member = await tx.of(RoomTables).member(line.room_id, self.service_user)
        if member is None or member.membership != "join":
            return False
        registry = self._registry()
        say = Say(registry.strings)
        offered = {slug: bot.name for slug, bot in registry.bots.items() if NAME in bot.surfaces}
        command = words.parse(line.text, offered)
        room = await tx.of(SocialTables).room(line.room_id)
        text = await self._carry_out(tx, line, room, command, say, followups)
        await self._reply(tx, line, text)
        log.info("%s: !rules %s", line.sender, type(command).__name__, extra={"room": line.room_id})
        return True

    async def _reply(self, tx: Tx, line: Line, text: str) -> None:
        if not text.strip():
            log.warning("no words to answer a !rules line with (strings: ### social)", extra={"room": line.room_id})
            return
        content = answer_content(text, thread_root=line.thread_root, reply_to=line.event_id, mention=line.sender)
        await tx.of(OutboxTables).enqueue(txn_id=f"summon.rules.{line.event_id}", room_id=line.room_id,
                                          sender=self.service_user, event_type="m.room.message", content=content)

    async def _power(self, tx: Tx, room_id: str, user_id: str, say: Say) -> str | None:
        """Why ``user_id`` may not change rules of ``room_id`` (None: they may)."""
        room = await tx.of(RoomTables).get(room_id)
        who = standing_in(user_id, room) if room is not None else None
        member = await tx.of(RoomTables).member(room_id, user_id)
        if who is not None and who.holds(self.level) and member is not None and member.membership == "join":
            return None
        log.info("%s may not change social rules of %s (level %s < %s)", user_id, room_id,
                 who.power_level if who else 0, self.level, extra={"room": room_id})
        return say("not_staff", level=self.level, yours=who.power_level if who else 0)

    def _usage(self, say: Say) -> str:
        return say("usage", commands=" · ".join(f"`{words.FORMS[name]}`" for name in words.SUBCOMMANDS))

    async def _carry_out(self, tx: Tx, line: Line, room: Bridged | None, command: words.RulesCommand, say: Say,
                         followups: list[Followup]) -> str:
        in_staff = line.room_id == self.staff_room
        if room is None and not in_staff:
            return say("not_bridged")
        if isinstance(command, Bad):
            return say.lines(say("bad", field=command.field, value=command.given, allowed=command.allowed,
                                 why=command.why or ""), self._usage(say))
        match command:
            case words.Usage():
                return self._usage(say)
            case words.ListRules():
                refused = await self._power(tx, line.room_id, line.sender, say)
                if refused is not None:
                    return refused
                return await self._list(tx, line.room_id if not in_staff else None, room, say)
            case words.AddRule():
                # In the review room, a rule is written for the bridged room it names (the review room governs it).
                if command.room is not None and not in_staff:
                    return say.lines(say("bad", field="in", value=command.room, allowed="only in the review room",
                                         why=""), self._usage(say))
                target = await tx.of(SocialTables).room(command.room) if command.room is not None else room
                if target is None or not target.bridged:
                    return say("not_bridged")
                refused = await self._power(tx, line.room_id, line.sender, say)
                if refused is not None:
                    return refused
                return await self._add(tx, line, target, command, say, followups)
            case words.Change() | words.Auto() as change:
                rule_id = change.id
                rule = await tx.of(SocialTables).rule(rule_id)
                if rule is None or rule.state == "removed" or (not in_staff and rule.room_id != line.room_id):
                    return await self._not_a_rule(tx, line.room_id if not in_staff else None, rule_id, say)
                refused = await self._power(tx, rule.governed_in, line.sender, say)
                if refused is not None:
                    return refused
                if isinstance(change, words.Auto):
                    return await self._auto(tx, line, rule, change.on, say)
                return await self._change(tx, line, rule, change.what, say)
        raise AssertionError(f"a !rules sub-command with no rule: {command!r}")

    async def _add(self, tx: Tx, line: Line, room: Bridged, command: words.AddRule, say: Say,
                   followups: list[Followup]) -> str:
        here = LINE_KINDS[room.conversation]
        why_room = say("bridged", network=room.network, conversation=say.conversation(room), bridge=room.bridge,
                       known_by=room.known_by)
        if command.kind != here:
            return say.lines(say("bad", field="on", value=command.kind, allowed=here,
                                 why=why_room), self._usage(say))
        if command.destination != DESTINATION[here]:
            return say.lines(say("bad", field="to", value=command.destination, allowed=DESTINATION[here],
                                 why=say.label(DESTINATION[here], room)), self._usage(say))
        registry = self._registry()
        bot = registry.get(command.bot)
        if bot is None or not may_answer_guest(registry, command.bot, self.server_name):
            allowed = ", ".join(slug for slug in registry.bots if may_answer_guest(registry, slug, self.server_name))
            return say.lines(say("bad", field="bot", value=command.bot, allowed=allowed or "none",
                                 why=say("why_unpublished", bot=command.bot)), self._usage(say))
        rule = await tx.of(SocialTables).add_rule(room_id=room.room_id, phrase=command.phrase, line_kind=command.kind,
                                                  bot=command.bot, destination=command.destination,
                                                  author=line.sender, made_in=line.event_id, governed_in=line.room_id)
        await tx.of(SocialTables).happened(rule.id, "written", by=line.sender)
        member = await tx.of(RoomTables).member(room.room_id, bot.user_id)
        if member is None or member.membership not in ("join", "invite"):
            followups.append(InvitePuppet(room.room_id, bot.user_id, self.service_user))
        shown = await self._list(tx, room.room_id, room, say) if line.room_id == room.room_id else await self._rule_line(
            tx, rule, say)
        return say.lines(say("added", id=rule.id), shown)

    async def about(self, tx: Tx, room_id: str) -> str:
        """The room's bridge and its rules, in a line or two ("" when it is not bridged)."""
        room = await tx.of(SocialTables).room(room_id)
        if room is None or not room.bridged:
            return ""
        say = Say(self._registry().strings)
        return await self._list(tx, room_id, room, say)

    async def _list(self, tx: Tx, room_id: str | None, room: Bridged | None, say: Say) -> str:
        rules = (await tx.of(SocialTables).rules_in(room_id) if room_id is not None
                 else await tx.of(SocialTables).all_rules(LISTED))
        head = say("bridged", network=room.network, conversation=say.conversation(room), bridge=room.bridge,
                   known_by=room.known_by) if room is not None and room_id is not None else ""
        if not rules:
            return say.lines(head, say("no_rules"))
        entries = [f"- {await self._rule_line(tx, rule, say)}" for rule in rules]
        return say.lines(head, say("rules"), "\n".join(entries))

    async def _rule_line(self, tx: Tx, rule: Rule, say: Say) -> str:
        room = await tx.of(SocialTables).room(rule.room_id)
        bot = self._registry().get(rule.bot)
        state = say("active") if rule.state == "active" else say("paused", why=rule.paused_why or "")
        return say("rule_line", id=rule.id, state=state, mode=say("auto") if rule.auto else say("drafts"),
                   phrase=rule.phrase, kind=rule.line_kind, bot=bot.name if bot else rule.bot,
                   label=say.label(rule.destination, room), author=rule.author)

    async def _not_a_rule(self, tx: Tx, room_id: str | None, rule_id: int, say: Say) -> str:
        rules = (await tx.of(SocialTables).rules_in(room_id) if room_id is not None
                 else await tx.of(SocialTables).all_rules(LISTED))
        return say("not_a_rule", id=rule_id, allowed=", ".join(f"#{r.id}" for r in rules) or "none")

    async def _change(self, tx: Tx, line: Line, rule: Rule, what: str, say: Say) -> str:
        tables = tx.of(SocialTables)
        if what == "history":
            return await self._history(tx, rule, say)
        if what == "pause":
            changed = await tables.set_state(rule.id, "paused", line.sender)
            await tables.happened(rule.id, "paused", by=line.sender)
            key = "paused_now"
        elif what == "resume":
            changed = await tables.set_state(rule.id, "active", None)
            await tables.happened(rule.id, "resumed", by=line.sender)
            key = "resumed"
        else:
            changed = await tables.set_state(rule.id, "removed", None)
            await tables.happened(rule.id, "removed", by=line.sender)
            key = "removed"
        shown = await self._rule_line(tx, changed, say) if changed is not None and changed.state != "removed" else ""
        return say.lines(say(key, id=rule.id), shown)

    async def _auto(self, tx: Tx, line: Line, rule: Rule, on: bool | None, say: Say) -> str:
        room = await tx.of(SocialTables).room(rule.room_id)
        if on is not None and on != rule.auto:
            changed = await tx.of(SocialTables).set_auto(rule.id, on)
            await tx.of(SocialTables).happened(rule.id, "auto_on" if on else "auto_off", by=line.sender)
            rule = changed or rule
        said = (say("auto_on", id=rule.id, label=say.label(rule.destination, room)) if rule.auto
                else say("auto_off", id=rule.id))
        return say.lines(said, await self._rule_line(tx, rule, say))

    async def _history(self, tx: Tx, rule: Rule, say: Say) -> str:
        rows = await tx.of(SocialTables).history(rule.id, HISTORY_SHOWN)
        if not rows:
            return say("no_history", id=rule.id)
        entries = []
        for r in rows:
            entries.append("- " + say("history_line", when=r.at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC"),
                                      what=r.what, by=r.by_whom or "", why=f"({r.why})" if r.why else "",
                                      run=f"run {r.run_id}" if r.run_id else "").strip())
        return say.lines(say("history", id=rule.id), "\n".join(entries))
