"""What a surface registers for the compile (``engine/content/kinds.py``): refused when two surfaces, or a surface
and the engine, bring the same thing; and each thing it brings holds only on it."""

from __future__ import annotations

import pytest

from engine.content import Kind, Kinds, Registry, compile_sources
from engine.content.kinds import Key, Pictures
from engine.core.messages import ToolSpec

SERVER = "example.org"
BELL = ToolSpec("ring_bell", "Ring the counter's bell when somebody asks for a person.")
COUNTER = Kind("counter", keys=(Key("bell", bool, False),), tools=(BELL,), strings={"counter": {"rang": ()}},
               commands=True, triggers=("walk-in",), events=("door.opened",), called="Counter")
KIOSK = Kind("kiosk")
KINDS = Kinds((COUNTER, KIOSK))


def compiled(sources: dict[str, str], kinds: Kinds = KINDS) -> Registry | list[str]:
    result = compile_sources(sources, kinds=kinds, server_name=SERVER)
    return result if isinstance(result, Registry) else [str(error) for error in result]


def bot(front: str) -> str:
    return f"---\nname: B\n{front}---\nHelp.\n"


@pytest.mark.parametrize(("kinds", "says"), [
    (lambda: Kinds(()), "at least one surface"),
    (lambda: Kinds((KIOSK, Kind("kiosk"))), "registered twice"),
    (lambda: Kinds((COUNTER, Kind("till", keys=(Key("bell", int, 0),)))), "same bot-file key: bell"),
    (lambda: Kinds((COUNTER, Kind("till", tools=(BELL,)))), "same built-in tool: ring_bell"),
    (lambda: Kinds((COUNTER, Kind("till", strings={"counter": {}}))), "same strings section: counter"),
])
def test_two_surfaces_may_not_bring_the_same_thing(kinds: object, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        kinds()  # type: ignore[operator]


@pytest.mark.parametrize(("kind", "says"), [
    (Kind("till", keys=(Key("name", str, ""),)), "bot-file key is already the engine's: name"),
    (Kind("till", tools=(ToolSpec("fetch", "Another fetch."),)), "built-in tool is already the engine's: fetch"),
    (Kind("till", strings={"endings": {}}), "strings section is already the engine's: endings"),
])
def test_a_surface_may_not_take_what_the_engine_has(kind: Kind, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        compiled({"bots/b.md": bot(""), "strings.md": "## bots\n"}, Kinds((kind,)))


def test_the_first_surface_is_where_a_bot_with_none_is_and_its_key_reads_back() -> None:
    registry = compiled({"bots/b.md": bot("bell: true\n")})
    assert isinstance(registry, Registry)
    b = registry.bots["b"]
    assert b.surfaces == ("counter",) and COUNTER.keys[0].of(b) is True


def test_what_a_surface_brings_is_refused_where_it_is_unknown() -> None:
    assert compiled({"bots/b.md": bot("surfaces: [desk]\n")}) == [
        "bots/b.md:3: surfaces[0]: should be 'counter' or 'kiosk', got 'desk'"]
    assert compiled({"bots/b.md": bot("hears: [walk-in, support-message]\n")}) == [
        "bots/b.md:3: hears[1]: unknown trigger 'support-message' (known: mention, schedule, event, walk-in)"]
    refused = compiled({"bots/b.md": bot("tools: [ring_bell]\n")}, Kinds((KIOSK,)))
    assert isinstance(refused, list) and "'ring_bell' is not a tool" in refused[0]
    refused = compiled({"strings.md": "## bots\n### counter\n- rang: Ding.\n"}, Kinds((KIOSK,)))
    assert isinstance(refused, list) and "unknown section '### counter'" in refused[0]


def test_commands_are_offered_only_where_a_surface_takes_them() -> None:
    sources = {"bots/b.md": bot("surfaces: [counter, kiosk]\n"), "commands/ask.md": "---\nbot: b\n---\nAsk.\n"}
    registry = compiled(sources)
    assert isinstance(registry, Registry) and registry.commands["ask"].surfaces == ("counter",)
    refused = compiled({**sources, "commands/ask.md": "---\nbot: b\nsurfaces: [kiosk]\n---\nAsk.\n"})
    assert isinstance(refused, list) and "surfaces[0]: should be 'counter'" in refused[0]


def test_a_tool_may_need_no_surface_that_does_not_say_so() -> None:
    refused = compiled({"tools/t.md": "---\ndescription: A tool.\nneeds: kiosk\nmodule: tools/t.py\n---\n"})
    assert isinstance(refused, list) and any("needs:" in line for line in refused)


def test_a_surfaces_events_wake_a_bot_and_are_named_by_what_the_author_calls_it() -> None:
    woken = compiled({"bots/b.md": bot("hears:\n  - event: door.opened\n    ask: Greet them.\n")})
    assert isinstance(woken, Registry)
    assert compiled({"bots/b.md": bot("hears:\n  - event: member.joined\n    ask: Greet them.\n")}) == [
        "bots/b.md:4: hears[0].event: unknown event 'member.joined' (Counter events: door.opened; a site's own"
        " events are written site.<name>, like site.purchase.paid)"]


def test_an_avatar_names_a_picture_by_uri_only_where_a_surface_holds_it() -> None:
    # No surface here holds pictures: an image file under content/ is all an avatar may be (a uri is refused,
    # told what it may be instead); a surface that holds some lets its uris through, and says so when refused.
    assert compiled({"bots/b.md": bot("avatar: mxc://example.org/abc\n")}) == [
        "bots/b.md:3: avatar: 'mxc://example.org/abc' is neither an image file under content/ (e.g. "
        "avatars/helper.png: .png, .jpg, .gif or .webp)"]
    assert isinstance(compiled({"bots/b.md": bot("avatar: avatars/b.png\n")}), Registry)
    shelf = Kinds((Kind("shelf", pictures=Pictures(r"shelf://[a-z]+", "a shelf:// uri")),))
    held = compiled({"bots/b.md": bot("avatar: shelf://abc\n")}, shelf)
    assert isinstance(held, Registry) and held.bots["b"].avatar == "shelf://abc"
    assert compiled({"bots/b.md": bot("avatar: shelf://ABC\n")}, shelf) == [
        "bots/b.md:3: avatar: 'shelf://ABC' is neither a shelf:// uri nor an image file under content/ (e.g. "
        "avatars/helper.png: .png, .jpg, .gif or .webp)"]
