"""The social surface's tables (``sql/queries/social.sql``): bridged rooms, rules, drafts, the review place's
posts and each rule's history. Reached in any transaction as ``tx.of(SocialTables)``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from engine.store.base import Family, maybe, rows


@dataclass(frozen=True, slots=True)
class Bridged:
    room_id: str
    bridge: str
    protocol: str
    network: str
    channel: str | None
    conversation: str  # dm · comments · group
    known_by: str  # state · members
    bridged: bool


@dataclass(frozen=True, slots=True)
class Rule:
    id: int
    room_id: str
    phrase: str
    line_kind: str  # dm · comment · group
    bot: str
    destination: str  # private · public
    state: str  # active · paused · removed
    auto: bool
    author: str
    governed_in: str  # where the author's power is asked: the room itself, or the review room it was written in
    paused_why: str | None


@dataclass(frozen=True, slots=True)
class Draft:
    id: int
    rule_id: int
    room_id: str
    thread: str | None
    line_event: str
    run_id: int | None
    text: str | None
    status: str  # asked · pending · sent · edited · discarded · held · ended
    settled_by: str | None


@dataclass(frozen=True, slots=True)
class Post:
    txn_id: str
    event_id: str | None
    conversation: str
    draft_id: int | None
    kind: str  # thread · draft · note


@dataclass(frozen=True, slots=True)
class Happened:
    id: int
    rule_id: int
    draft_id: int | None
    run_id: int | None
    what: str
    by_whom: str | None
    why: str | None
    at: datetime


@dataclass(frozen=True, slots=True)
class Counts:
    rooms: int
    active: int
    paused: int


class SocialTables(Family):
    __slots__ = ()

    async def keep_room(self, room: Bridged) -> bool:
        """Record ``room`` as bridged; what its state says is never overwritten by what its members suggest."""
        return await self._value("social_room_keep", room.room_id, room.bridge, room.protocol, room.network,
                                 room.channel, room.conversation, room.known_by) is not None

    async def room(self, room_id: str) -> Bridged | None:
        return maybe(Bridged, await self._one("social_room_get", room_id))

    async def unbridge(self, room_id: str) -> bool:
        return await self._value("social_room_unbridge", room_id) is not None

    async def counts(self) -> Counts:
        found = maybe(Counts, await self._one("social_rooms_count"))
        assert found is not None
        return found

    async def add_rule(self, *, room_id: str, phrase: str, line_kind: str, bot: str, destination: str, author: str,
                       made_in: str, governed_in: str) -> Rule:
        made = maybe(Rule, await self._one("social_rule_add", room_id, phrase, line_kind, bot, destination, author,
                                           made_in, governed_in))
        assert made is not None
        return made

    async def rule(self, rule_id: int) -> Rule | None:
        return maybe(Rule, await self._one("social_rule_get", rule_id))

    async def rules_in(self, room_id: str) -> list[Rule]:
        return rows(Rule, await self._all("social_rules_in_room", room_id))

    async def all_rules(self, most: int) -> list[Rule]:
        return rows(Rule, await self._all("social_rules_all", most))

    async def live_rules(self, room_id: str, line_kind: str) -> list[Rule]:
        return rows(Rule, await self._all("social_rules_live", room_id, line_kind))

    async def set_state(self, rule_id: int, state: str, why: str | None) -> Rule | None:
        return maybe(Rule, await self._one("social_rule_set_state", rule_id, state, why))

    async def set_auto(self, rule_id: int, on: bool) -> Rule | None:
        return maybe(Rule, await self._one("social_rule_set_auto", rule_id, on))

    async def add_draft(self, rule_id: int, room_id: str, thread: str | None, line_event: str,
                        line_key: str) -> int | None:
        """The draft's id; None when this line (by its key) made one for the rule before."""
        made: int | None = await self._value("social_draft_add", rule_id, room_id, thread, line_event, line_key)
        return made

    async def drafts_lately(self, rule_id: int) -> int:
        return int(await self._value("social_drafts_lately", rule_id) or 0)

    async def set_run(self, draft_id: int, run_id: int) -> None:
        await self._run("social_draft_set_run", draft_id, run_id)

    async def draft_of_run(self, run_id: int) -> Draft | None:
        return maybe(Draft, await self._one("social_draft_of_run", run_id))

    async def draft(self, draft_id: int) -> Draft | None:
        return maybe(Draft, await self._one("social_draft_get", draft_id))

    async def written(self, draft_id: int, text: str, status: str) -> Draft | None:
        return maybe(Draft, await self._one("social_draft_written", draft_id, text, status))

    async def settle(self, draft_id: int, status: str, *, by: str | None, text: str | None = None,
                     was: str = "pending") -> Draft | None:
        """Draft ``draft_id`` from ``was`` to ``status``; None when it was not ``was`` (settled already)."""
        return maybe(Draft, await self._one("social_draft_settle", draft_id, status, text, by, was))

    async def remember_post(self, txn_id: str, conversation: str, draft_id: int | None, kind: str) -> bool:
        return await self._value("social_post_remember", txn_id, conversation, draft_id, kind) is not None

    async def post_by_event(self, event_id: str) -> Post | None:
        return maybe(Post, await self._one("social_post_by_event", event_id))

    async def happened(self, rule_id: int, what: str, *, draft_id: int | None = None, run_id: int | None = None,
                       by: str | None = None, why: str | None = None) -> None:
        await self._run("social_history_add", rule_id, draft_id, run_id, what, by, why)

    async def history(self, rule_id: int, most: int) -> list[Happened]:
        return rows(Happened, await self._all("social_history_of", rule_id, most))
