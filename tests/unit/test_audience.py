"""The audience grammar: parsing, and who each class admits, from facts — and the facts a Matrix room's
state gives (its power levels, read by the Matrix surface: ``appservice.matrix.power``)."""

from __future__ import annotations

from typing import Any

import pytest

from appservice.matrix.power import Standing, standing
from engine.content.audience import (
    Audience,
    AudienceError,
    AudienceFacts,
    Term,
    admits,
    parse_audience,
)

LOCAL = "example.org"


@pytest.mark.parametrize(
    ("expression", "terms", "written_back"),
    [
        ("anyone", (Term("anyone"),), "anyone"),
        (" member ", (Term("member"),), "member"),
        ("user:@ann:example.org", (Term("user", "@ann:example.org"),), "user:@ann:example.org"),
        ("server:matrix.org", (Term("server", "matrix.org"),), "server:matrix.org"),
        ("server:localhost:8448", (Term("server", "localhost:8448"),), "server:localhost:8448"),
        ("tier:gold", (Term("tier", "gold"),), "tier:gold"),
        ("role:staff", (Term("role", "staff"),), "role:staff"),
        ("bought:the-book", (Term("bought", "the-book"),), "bought:the-book"),
        (["moderator", "customer"], (Term("moderator"), Term("customer")), ["moderator", "customer"]),
        (["admin"], (Term("admin"),), ["admin"]),
    ],
)
def test_parse(expression: object, terms: tuple[Term, ...], written_back: object) -> None:
    audience = parse_audience(expression)
    assert audience.terms == terms
    assert audience.expression() == written_back


@pytest.mark.parametrize(
    ("expression", "message", "index"),
    [
        (
            "vip",
            "unknown audience class 'vip' (known: anyone, authenticated, local, member, moderator, admin,",
            None,
        ),
        ("Member", "unknown audience class 'Member'", None),
        (["member", "vip", "gold"], "unknown audience classes 'vip', 'gold'", 1),
        ("user:alice", "'user:alice' is not a valid audience class: write it as user:@name:server", None),
        ("user:@alice", "'user:@alice' is not a valid audience class", None),
        ("server:", "'server:' is not a valid audience class: write it as server:<name>", None),
        ("tier:Gold Plus", "write it as tier:<slug>", None),
        ("role:", "write it as role:<name>", None),
        (["member", "role:"], "write it as role:<name>", 1),
        ("colour:red", "unknown audience class 'colour:red'", None),
        ([], "an empty list admits no one", None),
        (["member", 3], "an audience class is a word like 'member', not 3", 1),
        (5, "an audience is a class like 'member' or a list of them, not 5", None),
        ({"member": True}, "an audience is a class like 'member' or a list of them", None),
    ],
)
def test_parse_refuses(expression: object, message: str, index: int | None) -> None:
    with pytest.raises(AudienceError) as raised:
        parse_audience(expression)
    assert message in str(raised.value)
    assert raised.value.index == index


def facts(**overrides: Any) -> AudienceFacts:
    base: dict[str, Any] = {"user_id": "@ann:example.org", "local_server": LOCAL}
    return AudienceFacts(**(base | overrides))


GUEST = facts(user_id=None)
ANN = facts()
REMOTE = facts(user_id="@bob:matrix.org")
MEMBER = facts(is_member=True)
MOD = facts(is_member=True, is_moderator=True)
ADMIN = facts(is_member=True, is_moderator=True, is_admin=True)
CREATOR = facts(is_member=True, is_admin=True)  # a v12 creator: an admin whatever their level
LOW_BAR_MOD = facts(is_moderator=True)  # a room whose moderators need only 10: the surface says so
BUYER = facts(site_classes=frozenset({"customer", "tier:gold", "role:staff", "bought:book"}))

ADMITS = [
    ("anyone", GUEST, True),
    ("authenticated", GUEST, False),
    ("authenticated", REMOTE, True),
    ("local", ANN, True),
    ("local", REMOTE, False),
    ("local", GUEST, False),
    ("member", ANN, False),
    ("member", MEMBER, True),
    ("member", facts(user_id=None, is_member=True), False),
    ("moderator", MEMBER, False),
    ("moderator", MOD, True),
    ("moderator", ADMIN, True),
    ("moderator", CREATOR, True),
    ("moderator", LOW_BAR_MOD, True),
    ("admin", MOD, False),
    ("admin", ADMIN, True),
    ("admin", CREATOR, True),
    ("admin", LOW_BAR_MOD, False),
    ("admin", facts(is_admin=True), True),
    ("admin", facts(user_id=None, is_admin=True), False),
    ("moderator", facts(user_id=None, is_moderator=True), False),
    ("user:@ann:example.org", ANN, True),
    ("user:@ann:example.org", REMOTE, False),
    ("user:@ann:example.org", GUEST, False),
    ("server:matrix.org", REMOTE, True),
    ("server:matrix.org", ANN, False),
    ("server:example.org", GUEST, False),
    ("customer", BUYER, True),
    ("customer", ANN, False),
    ("subscribed", BUYER, False),
    ("tier:gold", BUYER, True),
    ("tier:silver", BUYER, False),
    ("role:staff", BUYER, True),
    ("bought:book", BUYER, True),
    ("bought:film", BUYER, False),
    (["admin", "server:matrix.org"], REMOTE, True),
    (["admin", "server:matrix.org"], ANN, False),
    (["admin", "tier:gold"], BUYER, True),
]


@pytest.mark.parametrize(("expression", "who", "expected"), ADMITS)
def test_admits(expression: object, who: AudienceFacts, expected: bool) -> None:
    assert admits(parse_audience(expression), who) is expected


def test_unset_admits_anyone_the_surface_allows() -> None:
    assert admits(None, GUEST) is True


V12_CREATE: dict[str, Any] = {"room_version": "12", "additional_creators": ["@cat:example.org"]}
DEFAULT_LEVELS: dict[str, Any] = {
    "users": {"@mod:example.org": 50, "@boss:example.org": 100},
    "events": {"m.room.power_levels": 100},
}


def room(
    user_id: str | None,
    levels: dict[str, Any] | None,
    *,
    version: str = "11",
    create: dict[str, Any] | None = None,
    sender: str | None = "@founder:example.org",
) -> AudienceFacts:
    return standing(user_id, levels, create or {}, version, create_sender=sender).facts(LOCAL, is_member=True)


# (who, power levels, room version, create content, admitted as moderator, as admin)
ROOMS = [
    pytest.param("@someone:example.org", DEFAULT_LEVELS, "11", None, False, False, id="plain-user"),
    pytest.param("@mod:example.org", DEFAULT_LEVELS, "11", None, True, False, id="moderator-at-50"),
    pytest.param("@boss:example.org", DEFAULT_LEVELS, "11", None, True, True, id="admin-at-100"),
    pytest.param(
        "@founder:example.org", DEFAULT_LEVELS, "11", None, False, False, id="v11-creator-is-only-their-level"
    ),
    pytest.param(
        "@founder:example.org", DEFAULT_LEVELS, "12", V12_CREATE, True, True, id="v12-creator-is-admin"
    ),
    pytest.param(
        "@cat:example.org", DEFAULT_LEVELS, "12", V12_CREATE, True, True, id="v12-additional-creator"
    ),
    pytest.param("@founder:example.org", DEFAULT_LEVELS, "13", None, True, True, id="later-versions-too"),
    pytest.param("@founder:example.org", DEFAULT_LEVELS, "org.matrix.hydra.11", None, True, True, id="hydra"),
    pytest.param(
        "@cat:example.org",
        DEFAULT_LEVELS,
        "11",
        V12_CREATE,
        False,
        False,
        id="additional-creators-ignored-before-12",
    ),
    pytest.param(
        "@someone:example.org", {"users_default": 50}, "11", None, True, True, id="users-default-50-no-events"
    ),
    pytest.param(
        "@someone:example.org",
        {"users_default": 50, "events": {"m.room.power_levels": 100}},
        "11",
        None,
        True,
        False,
        id="users-default-50",
    ),
    pytest.param(
        "@x:example.org",
        {"users": {"@x:example.org": 75}, "state_default": 75},
        "11",
        None,
        True,
        True,
        id="state-default-75-admin",
    ),
    pytest.param(
        "@x:example.org",
        {"users": {"@x:example.org": 74}, "state_default": 75},
        "11",
        None,
        True,
        False,
        id="state-default-75-not-yet",
    ),
    pytest.param(
        "@x:example.org",
        {"users": {"@x:example.org": 75}, "state_default": 75, "events": {"m.room.power_levels": 90}},
        "11",
        None,
        True,
        False,
        id="power-levels-event-level-wins",
    ),
    pytest.param(
        "@x:example.org",
        {"users": {"@x:example.org": 60}, "kick": 70, "events": {"m.room.power_levels": 100}},
        "11",
        None,
        False,
        False,
        id="kick-raised",
    ),
    pytest.param(
        "@x:example.org",
        {"users": {"@x:example.org": 60}, "kick": 70},
        "11",
        None,
        True,
        True,
        id="state-default-50-is-admin",
    ),
    pytest.param(
        "@x:example.org",
        {"users": {"@x:example.org": 60}, "redact": 70, "events": {"m.room.power_levels": 100}},
        "11",
        None,
        False,
        False,
        id="redact-raised",
    ),
    pytest.param(
        "@x:example.org",
        {"users": {"@x:example.org": "100"}},
        "1",
        None,
        True,
        True,
        id="string-levels-old-rooms",
    ),
    pytest.param(
        "@founder:example.org", None, "11", None, True, True, id="no-power-levels-sender-creator-100"
    ),
    pytest.param(
        "@old:example.org",
        None,
        "5",
        {"creator": "@old:example.org"},
        True,
        True,
        id="no-power-levels-content-creator",
    ),
    pytest.param("@someone:example.org", None, "11", None, False, False, id="no-power-levels-others-0"),
    pytest.param(None, {"users_default": 100}, "11", None, False, False, id="nobody-is-never-admin"),
]


@pytest.mark.parametrize(("user_id", "levels", "version", "create", "moderator", "admin"), ROOMS)
def test_power_levels(
    user_id: str | None,
    levels: dict[str, Any] | None,
    version: str,
    create: dict[str, Any] | None,
    moderator: bool,
    admin: bool,
) -> None:
    who = room(user_id, levels, version=version, create=create)
    assert admits(parse_audience("moderator"), who) is moderator
    assert admits(parse_audience("admin"), who) is admin


def test_power_levels_facts_carry_the_room_rules() -> None:
    where = standing("@x:example.org", {"users_default": 5, "state_default": 75, "kick": 60, "redact": 40}, {}, "11")
    assert where == Standing("@x:example.org", power_level=5, moderator_level=60, admin_level=75, is_creator=False)
    who = where.facts(LOCAL, is_member=True, site_classes=frozenset({"customer"}))
    assert who == AudienceFacts(
        user_id="@x:example.org",
        local_server=LOCAL,
        is_member=True,
        is_moderator=False,
        is_admin=False,
        site_classes=frozenset({"customer"}),
    )
    assert admits(parse_audience(["member", "customer", "local"]), who)


def test_audience_reads_back() -> None:
    assert str(Audience((Term("member"), Term("tier", "gold")))) == "member, tier:gold"
