"""Events, pure: which bots hear an event, and who may post a site event (the signature, the timestamp,
the key's scope) and what the body must say."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from appservice.config import HookKey
from appservice.hooks import (
    DELIVERY,
    KEY,
    SIGNATURE,
    TIMESTAMP,
    Rejected,
    SiteEvent,
    Verified,
    in_scope,
    room_in_scope,
    sign,
    site_event,
    verify,
)
from appservice.kinds import KINDS
from engine.content import Registry, compile_sources
from engine.run.events import hearers, wake

GREETER = """---
name: Greeter
hears:
  - mention
  - event: member.joined
    ask: Welcome them and point them at the rules.
  - event: member.joined
    ask: A second trigger for the same event is not a second run.
  - event: site.purchase.paid
    ask: Thank them for the purchase.
---
You greet people.
"""

CASHIER = """---
name: Cashier
hears:
  - event: site.purchase.paid
    ask: Check the order went through.
---
You look after orders.
"""

QUIET = """---
name: Quiet
---
You only answer when asked.
"""


def registry() -> Registry:
    result = compile_sources(
        {"bots/greeter.md": GREETER, "bots/cashier.md": CASHIER, "bots/quiet.md": QUIET}, kinds=KINDS, server_name="localhost",
    )
    assert isinstance(result, Registry), result
    return result


def test_hearers_are_the_bots_whose_hears_names_the_event_with_its_ask() -> None:
    reg = registry()
    paid = [(bot.slug, trigger.ask) for bot, trigger in hearers(reg, "site.purchase.paid")]
    assert paid == [("cashier", "Check the order went through."), ("greeter", "Thank them for the purchase.")]
    joined = [(bot.slug, trigger.ask) for bot, trigger in hearers(reg, "member.joined")]
    assert joined == [("greeter", "Welcome them and point them at the rules.")]


def test_an_event_nobody_hears_has_no_hearers() -> None:
    reg = registry()
    assert hearers(reg, "member.left") == []
    assert hearers(reg, "site.support.escalated") == []
    assert hearers(reg, "mention") == []


def test_hearers_follow_a_new_registry() -> None:
    first = registry()
    assert [b.slug for b, _ in hearers(first, "member.joined")] == ["greeter"]
    only_quiet = compile_sources({"bots/quiet.md": QUIET}, kinds=KINDS, server_name="localhost")
    assert isinstance(only_quiet, Registry)
    assert hearers(only_quiet, "member.joined") == []
    assert [b.slug for b, _ in hearers(first, "member.joined")] == ["greeter"]


# --- who may post a site event ---------------------------------------------------------------------------

SECRET = "shop-secret-0123456789abcdef"
KEYS = {
    "shop": HookKey(secret=SECRET, events=("site.purchase.paid", "site.support.*"), rooms=("!shop:localhost",)),
    "crm": HookKey(secret="crm-secret-0123456789abcdef", events=("site.*",), rooms=("*",)),
}
PAID = "site.purchase.paid"
NOW = 1_800_000_000
BODY = b'{"room_id": "!shop:localhost", "subject": "@ann:localhost", "order": 12}'
UUID = "5b0e7c1e-8f5a-4a7e-9c55-0d7a4a1e2f10"


def headers(*, key: str = "shop", ts: int = NOW, delivery: str = UUID, secret: str = SECRET,
            body: bytes = BODY, event: str = PAID, drop: str | None = None) -> dict[str, str]:
    out = {KEY: key, TIMESTAMP: str(ts), DELIVERY: delivery, SIGNATURE: sign(secret, str(ts), event, body)}
    if drop is not None:
        del out[drop]
    return out


def test_the_signature_covers_the_timestamp_the_event_and_the_body() -> None:
    expected = hmac.new(SECRET.encode(), f"{NOW}.{PAID}.".encode() + BODY, hashlib.sha256).hexdigest()
    assert sign(SECRET, str(NOW), PAID, BODY) == f"sha256={expected}"


@pytest.mark.parametrize(
    ("given", "event", "body", "status"),
    [
        (headers(), "site.purchase.paid", BODY, None),
        (headers(ts=NOW - 299), "site.purchase.paid", BODY, None),
        (headers(ts=NOW + 299), "site.purchase.paid", BODY, None),
        (headers(event="site.support.escalated"), "site.support.escalated", BODY, None),
        (headers(), "site.support.escalated", BODY, 401),
        (headers(secret="not-the-secret-0123456789"), "site.purchase.paid", BODY, 401),
        (headers(), "site.purchase.paid", BODY + b" ", 401),
        (headers(ts=NOW - 301), "site.purchase.paid", BODY, 401),
        (headers(ts=NOW + 301), "site.purchase.paid", BODY, 401),
        ({**headers(), TIMESTAMP: "soon"}, "site.purchase.paid", BODY, 401),
        ({**headers(), SIGNATURE: sign(SECRET, str(NOW), PAID, BODY).removeprefix("sha256=")}, "site.purchase.paid", BODY, 401),
        (headers(key="nobody"), "site.purchase.paid", BODY, 401),
        (headers(event="site.purchase.refunded"), "site.purchase.refunded", BODY, 403),
        (headers(key="crm", secret="crm-secret-0123456789abcdef", event="site.purchase.refunded"),
         "site.purchase.refunded", BODY, None),
        (headers(delivery="not-a-uuid"), "site.purchase.paid", BODY, 400),
        (headers(drop=KEY), "site.purchase.paid", BODY, 401),
        (headers(drop=TIMESTAMP), "site.purchase.paid", BODY, 401),
        (headers(drop=DELIVERY), "site.purchase.paid", BODY, 401),
        (headers(drop=SIGNATURE), "site.purchase.paid", BODY, 401),
        ({**headers(), SIGNATURE: ""}, "site.purchase.paid", BODY, 401),
    ],
    ids=[
        "good", "good_4m59_old", "good_4m59_ahead", "good_other_scoped_event",
        "signed_for_another_event", "bad_secret", "body_changed",
        "stale", "future", "timestamp_not_seconds", "signature_without_scheme", "unknown_key",
        "key_not_scoped", "wildcard_key", "delivery_not_uuid", "no_key", "no_timestamp", "no_delivery",
        "no_signature", "empty_signature",
    ],
)
def test_verify(given: dict[str, str], event: str, body: bytes, status: int | None) -> None:
    verdict = verify(given, body, event, KEYS, NOW)
    if status is None:
        assert isinstance(verdict, Verified), verdict
        assert verdict.key_id == given[KEY] and verdict.delivery == UUID
        assert verdict.signature == given[SIGNATURE]
    else:
        assert isinstance(verdict, Rejected) and verdict.status == status, verdict


def test_a_rejection_never_says_whether_the_key_or_the_signature_was_wrong() -> None:
    unknown = verify(headers(key="nobody"), BODY, "site.purchase.paid", KEYS, NOW)
    forged = verify(headers(secret="not-the-secret-0123456789"), BODY, "site.purchase.paid", KEYS, NOW)
    assert isinstance(unknown, Rejected) and isinstance(forged, Rejected)
    assert unknown.reason == forged.reason


@pytest.mark.parametrize(
    ("event", "scopes", "expected"),
    [
        ("site.purchase.paid", ("site.purchase.paid",), True),
        ("site.purchase.paid2", ("site.purchase.paid",), False),
        ("site.support.escalated", ("site.support.*",), True),
        ("site.support.a.b", ("site.support.*",), True),
        ("site.supportx", ("site.support.*",), False),
        ("site.support", ("site.support.*",), False),
        ("site.anything", ("site.*",), True),
        ("site.purchase.paid", (), False),
    ],
)
def test_scope(event: str, scopes: tuple[str, ...], expected: bool) -> None:
    assert in_scope(event, scopes) is expected


def test_a_key_scope_must_name_site_events() -> None:
    with pytest.raises(ValueError, match="events"):
        HookKey(secret=SECRET, events=("member.joined",), rooms=("*",))
    with pytest.raises(ValueError, match="events"):
        HookKey(secret=SECRET, events=(), rooms=("*",))


@pytest.mark.parametrize("rooms", [None, (), ("shop",), ("#shop:localhost",), ("!shop",), ("**",)],
                         ids=["unsaid", "none", "a_word", "an_alias", "no_server", "not_a_star"])
def test_a_key_must_name_the_rooms_it_may_post_for(rooms: tuple[str, ...] | None) -> None:
    given = {} if rooms is None else {"rooms": rooms}
    with pytest.raises(ValueError, match="rooms"):
        HookKey(secret=SECRET, events=("site.*",), **given)


@pytest.mark.parametrize(
    ("room", "rooms", "expected"),
    [
        ("!shop:localhost", ("!shop:localhost",), True),
        ("!shop:localhost", ("!other:localhost", "!shop:localhost"), True),
        ("!other:localhost", ("!shop:localhost",), False),
        ("!shop:localhost.evil", ("!shop:localhost",), False),
        ("!anything:anywhere", ("*",), True),
    ],
)
def test_room_scope(room: str, rooms: tuple[str, ...], expected: bool) -> None:
    assert room_in_scope(room, rooms) is expected


# --- what the body must say ------------------------------------------------------------------------------

def test_the_body_is_the_facts_untouched_with_its_room_subject_and_conversation() -> None:
    event = site_event(BODY)
    assert event == SiteEvent("!shop:localhost", "@ann:localhost", "@ann:localhost", json.loads(BODY))
    named = site_event(b'{"room_id": "!shop:localhost", "conversation": "order-12"}')
    assert isinstance(named, SiteEvent) and (named.subject, named.conversation) == (None, "order-12")
    roomed = site_event(b'{"room_id": "!shop:localhost"}')
    assert isinstance(roomed, SiteEvent) and roomed.conversation == "!shop:localhost"


@pytest.mark.parametrize(
    "body",
    [b"{not json", b"[1, 2]", b'"text"', b"\xff\xfe", b'{"subject": "@ann:localhost"}', b'{"room_id": "shop"}',
     b'{"room_id": "!shop:localhost", "subject": 7}', b'{"room_id": "!shop:localhost", "conversation": ""}'],
    ids=["not_json", "a_list", "a_string", "not_utf8", "no_room", "not_a_room", "subject_not_text",
         "conversation_empty"],
)
def test_a_bad_body_is_400(body: bytes) -> None:
    rejected = site_event(body)
    assert isinstance(rejected, Rejected) and rejected.status == 400


class NoDatabase:
    """A transaction (or a surface) that fails the test if anything asks it anything."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"an event nobody hears must not reach the database (asked for {name})")


async def test_waking_an_event_nobody_hears_is_one_lookup_and_no_query() -> None:
    results = await wake(NoDatabase(), registry(), "site.support.escalated",  # type: ignore[arg-type]
                         surface=NoDatabase(), occurrence="d-1", place="!r:localhost",  # type: ignore[arg-type]
                         subject=None, facts={}, conversation="c")
    assert results == []
