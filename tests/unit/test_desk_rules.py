"""The desk's rules, pure: who has a conversation after each thing that happens to it, which bots work an
inbox, and the desk's configuration refused in one line."""

from __future__ import annotations

import pytest

from appservice.config import ConfigError, parse_config
from appservice.desk import rules
from appservice.desk.rules import State
from appservice.kinds import KINDS
from engine.content import Registry, compile_sources

PENDING = State("pending", handler_bot="clerk")


@pytest.mark.parametrize(("before", "change", "after"), [
    (State("open"), rules.written, State("open")),
    (State("resolved", "clerk", resolution="confirmed"), rules.written, State("pending", "clerk")),
    (State("resolved", "clerk", bot_off=True), rules.written, State("open", "clerk", bot_off=True)),
    (State("resolved", "clerk", assignee="bea"), rules.written, State("open", "clerk", assignee="bea")),
    (State("pending", "clerk", resolution="confirmed"), rules.written, PENDING),  # they came back for more
    (PENDING, rules.talk_to_a_person, State("open", "clerk", bot_off=True)),
    (PENDING, rules.bot_failed, State("open", "clerk", bot_off=True)),
    (PENDING, rules.helped, State("pending", "clerk", resolution="confirmed")),
    (PENDING, lambda s: rules.staff_replied(s, "bea"), State("open", "clerk", assignee="bea")),
    (PENDING, lambda s: rules.assigned(s, "bea"), State("open", "clerk", assignee="bea")),
    (State("open"), lambda s: rules.chosen(s, "guide"), State("pending", "guide")),
    (State("open", "clerk", "bea", bot_off=True), lambda s: rules.toggled(s, "pending", None),
     State("pending", "clerk")),
    (State("open"), lambda s: rules.toggled(s, "pending", None), None),
    (State("open"), lambda s: rules.toggled(s, "pending", None, agent_bot=True), State("pending")),
    (PENDING, lambda s: rules.resolved(s, "assumed"), State("resolved", "clerk", resolution="assumed")),
])
def test_who_has_it_after(before: State, change, after: State | None) -> None:  # type: ignore[no-untyped-def]
    assert change(before) == after


def test_bots_start_only_until_a_person_is_asked_for_and_again_once_a_human_has_it() -> None:
    assert PENDING.bots_answer and PENDING.bots_may_start
    off = rules.talk_to_a_person(PENDING)
    assert not off.bots_answer and not off.bots_may_start
    taken = rules.staff_replied(off, "bea")
    assert taken.bots_may_start and not taken.bots_answer  # drafts may help the human; nobody answers over them


def test_an_inbox_roster_sorts_its_bots_by_how_the_desk_starts_them() -> None:
    bot = "---\nname: {n}\nsurfaces: [{s}]\n{extra}limits: {{per: {{day: 1}}}}\n---\nHi.\n"
    registry = compile_sources({
        "bots/a.md": bot.format(n="A", s="desk", extra="offer: always\n"),
        "bots/b.md": bot.format(n="B", s="desk", extra="offer: ask\n"),
        "bots/c.md": bot.format(n="C", s="desk", extra="hears: [support-message]\n"),
        "bots/r.md": bot.format(n="R", s="rooms", extra=""),
    }, kinds=KINDS, server_name="x")
    assert isinstance(registry, Registry), registry
    everyone = rules.roster(registry.bots.values(), None)
    assert [[b.slug for b in group] for group in (everyone.always, everyone.ask, everyone.hearers)] == [["a"], ["b"], ["c"]]
    assert everyone.default_bot() == "a"
    only = rules.roster(registry.bots.values(), ("c", "b", "r"))
    assert (only.always, [b.slug for b in only.all()]) == ((), ["b", "c"])


BASE = {"homeserver": {"url": "http://h", "server_name": "x"},
        "appservice": {"address": "http://a", "as_token": "a" * 16, "hs_token": "h" * 16},
        "database": {"dsn": "postgresql://d/x"}}
DESK = {"secret": "s" * 32, "inboxes": {"web": {"title": "Help", "staff_key": "k" * 16}}}


def test_the_desk_is_off_unless_configured_and_refused_in_one_line() -> None:
    assert parse_config(BASE, {}).desk is None
    desk = parse_config({**BASE, "desk": DESK}, {}).desk
    assert desk is not None and desk.listen.port == 29380 and desk.inboxes["web"].webhooks == ()
    for bad, said in [
        ({**DESK, "secret": "short"}, "config: desk.secret: String should have at least 32 characters"),
        ({**DESK, "inboxes": {}}, "config: desk.inboxes: Dictionary should have at least 1 item after validation, not 0"),
        ({**DESK, "inboxes": {"a": {"title": "A", "staff_key": "k" * 16, "identifier": "web"},
                               "web": {"title": "B", "staff_key": "k" * 16}}},
         "config: desk: Value error, inboxes a and web have the same identifier 'web'"),
    ]:
        with pytest.raises(ConfigError) as refused:
            parse_config({**BASE, "desk": bad}, {})
        assert str(refused.value) == said
