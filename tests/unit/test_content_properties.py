"""Property tests of the content grammar (hypothesis): any valid bot file compiles, writes back, and
compiles again to the same bot; writing is stable; a mangled key is refused at its own line."""

from __future__ import annotations

from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis")

import yaml  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from appservice.kinds import KINDS  # noqa: E402
from engine.content import Registry, compile_sources, write_bot  # noqa: E402
from engine.content.files import read_kit  # noqa: E402
from engine.core.messages import ENDINGS  # noqa: E402

SERVER = "example.org"
KIT = read_kit()
TERMS = ["anyone", "authenticated", "local", "member", "moderator", "admin", "customer", "subscribed",
         "user:@ann:example.org", "server:example.org", "tier:gold", "role:staff", "bought:the-book"]
DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
WINDOWS = ["minute", "hour", "day", "week", "month"]

# Text an author might write, including words YAML would read as something else.
words = st.one_of(
    st.sampled_from(["off", "on", "yes", "no", "null", "~", "10:30", "08:00", "1e3", "- x", "a: b", "#x", "'q'"]),
    st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=30),
).filter(lambda s: s.strip() != "" and "\n" not in s)
money = st.floats(min_value=0, max_value=100, allow_nan=False, allow_infinity=False)
audience = st.one_of(st.sampled_from(TERMS), st.lists(st.sampled_from(TERMS), min_size=1, max_size=3, unique=True))


@st.composite
def schedules(draw: st.DrawFn) -> dict[str, Any]:
    every = draw(st.sampled_from(["day", "week", "month", "1 minute", "15 minutes", "2 hours"]))
    rule: dict[str, Any] = {"every": every}
    if every in ("day", "week", "month"):
        if draw(st.booleans()):
            rule["at"] = f"{draw(st.integers(0, 23)):02}:{draw(st.integers(0, 59)):02}"
        if draw(st.booleans()):
            rule["interval"] = draw(st.integers(1, 9))
    if every in ("day", "week") and draw(st.booleans()):
        rule["on"] = draw(st.lists(st.sampled_from(DAYS), min_size=1, max_size=7, unique=True))
    if draw(st.booleans()):
        rule["zone"] = draw(st.sampled_from(["UTC", "Europe/Dublin", "Asia/Tokyo"]))
    if draw(st.booleans()):
        rule["until"] = draw(st.dates()).isoformat()
    if draw(st.booleans()):
        rule["except"] = [d.isoformat() for d in draw(st.lists(st.dates(), min_size=1, max_size=3, unique=True))]
    room = draw(st.sampled_from(["!abc:example.org", "#general:example.org"]))
    return {"schedule": rule, "in": room, "ask": draw(words)}


@st.composite
def bot_files(draw: st.DrawFn) -> dict[str, Any]:
    front: dict[str, Any] = {"name": draw(words)}
    surfaces = draw(st.lists(st.sampled_from(["rooms", "desk", "voice"]), min_size=1, max_size=3, unique=True))
    front["surfaces"] = surfaces
    for key in ("for", "serves"):
        if draw(st.booleans()):
            front[key] = draw(audience)
    hears: list[Any] = ["mention"] if draw(st.booleans()) else []
    hears += draw(st.lists(schedules(), max_size=2))
    if draw(st.booleans()):
        hears.append({"event": draw(st.sampled_from(["member.joined", "member.left", "site.purchase.paid"])),
                      "ask": draw(words)})
    front["hears"] = hears
    if draw(st.booleans()):
        front["tools"] = draw(st.lists(st.sampled_from(["about_me", "fetch", "open_skill", "raise_ticket",
                                                        "search_site"]), unique=True))
    if draw(st.booleans()):
        front["skills"] = draw(st.one_of(st.just("all"), st.lists(st.sampled_from(sorted(
            name.removeprefix("skills/").removesuffix(".md") for name in KIT if name.startswith("skills/"))), unique=True)))
    limits: dict[str, Any] = {}
    if draw(st.booleans()):
        limits["steps"] = draw(st.integers(1, 1000))
    if draw(st.booleans()):
        limits["spend"] = draw(money)
    if draw(st.booleans()):
        limits["minutes"] = draw(st.floats(min_value=0.01, max_value=600, allow_nan=False))
    per = draw(st.dictionaries(st.sampled_from(WINDOWS), money))
    if "desk" in surfaces and draw(st.booleans()):
        per = per or {"day": 1.0}
        front["offer"] = draw(st.sampled_from(["ask", "always"]))
        front["answers"] = draw(st.sampled_from(["draft", "directly"]))
    if per:
        limits["per"] = per
    front["limits"] = limits
    if draw(st.booleans()):
        front["memory"] = draw(st.sampled_from(["none", "thread", "person", "person+recall"]))
    if draw(st.booleans()):
        front["endings"] = draw(st.dictionaries(st.sampled_from(list(ENDINGS)), words))
    if "voice" in surfaces and draw(st.booleans()):
        front["voice"] = {"voice": draw(words), "voices": draw(st.lists(words, max_size=3, unique=True))}
    if draw(st.booleans()):
        front["extends"] = "desk"
    return front


def compiled(text: str) -> Registry:
    result = compile_sources({"bots/b.md": text}, kinds=KINDS, server_name=SERVER, kit=KIT)
    assert isinstance(result, Registry), "\n".join(map(str, result))
    return result


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(front=bot_files(), body=st.text(min_size=1, max_size=200).filter(lambda s: s.strip() and "---" not in s))
def test_any_valid_bot_round_trips(front: dict[str, Any], body: str) -> None:
    text = "---\n" + yaml.safe_dump(front, sort_keys=False, allow_unicode=True) + "---\n" + body + "\n"
    bot = compiled(text).bots["b"]
    written = write_bot(bot)
    again = compiled(written).bots["b"]
    assert again == bot
    assert write_bot(again) == written


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(front=bot_files(), key=st.from_regex(r"[a-z]{3,10}", fullmatch=True))
def test_an_unknown_key_is_refused_at_its_line(front: dict[str, Any], key: str) -> None:
    if key in front or key in ("glyph", "avatar", "model", "voice", "extends", "tools", "skills", "offer", "answers"):
        return
    head = "---\n" + yaml.safe_dump(front, sort_keys=False, allow_unicode=True)
    text = head + f"{key}: 1\n---\nx\n"
    result = compile_sources({"bots/b.md": text}, kinds=KINDS, server_name=SERVER, kit=KIT)
    assert isinstance(result, list)
    line = head.count("\n") + 1
    assert [str(e).split(" (")[0] for e in result] == [f"bots/b.md:{line}: unknown key '{key}'"]
