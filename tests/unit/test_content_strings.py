"""content/strings.md: the grammar, its refusals at their lines, and the kit's words under the site's."""

from __future__ import annotations

import pytest

from appservice.kinds import KINDS
from engine.content import Registry, Strings, compile_sources
from engine.content.strings import CATALOGUE, parse_strings

SERVER = "example.org"


def parsed(text: str) -> Strings:
    result = parse_strings("strings.md", text)
    assert isinstance(result, Strings), result
    return result


def test_entries_by_section_with_continued_lines() -> None:
    strings = parsed(
        "# Our words\n\nA preamble for people.\n\n## bots\n\n### endings\n\n- failed: It broke.\n"
        "  Ask a person.\n- cancelled: Stopped.\n\n### progress\n\n- working: {bot} is on it…\n"
    )
    assert strings.get("endings", "failed") == "It broke.\nAsk a person."
    assert strings.get("endings", "cancelled") == "Stopped."
    assert strings.get("progress", "working") == "{bot} is on it…"
    assert strings.get("context", "joined") is None


REFUSALS = [
    ("## site\n\n- failed: x\n", "strings.md:1: unknown scope '## site' (scopes: bots)"),
    ("## bots\n### endngs\n- failed: x\n", "strings.md:2: unknown section '### endngs' under ## bots (sections: " + ", ".join(CATALOGUE) + ")"),
    ("## bots\n### endings\n- broke: x\n", "strings.md:3: unknown key 'broke' in ### endings (keys: cancelled, out_of_money, out_of_steps, out_of_time, nothing_to_add, failed)"),
    ("## bots\n### endings\n- failed: x\n- failed: y\n", "strings.md:4: 'failed' is given twice in ### endings (first at line 3)"),
    ("## bots\n### endings\nfailed: x\n", "strings.md:3: a string is a '- key: text' line (or a line indented under one)"),
    ("### endings\n- failed: x\n", "strings.md:1: a ### section belongs under a '## bots' heading"),
    ("- failed: x\n", "strings.md:1: a string belongs under '## bots' and a ### section"),
    ("## bots\n### context\n- joined: {who} joined\n", "strings.md:3: 'joined' in ### context: unknown placeholder {who} (it is given: {name})"),
    ("## bots\n### endings\n- failed:\n", "strings.md:3: 'failed' in ### endings has no words: leave it out to say nothing"),
    ("## bots\n### endings\n#### more\n", "strings.md:3: strings go two levels deep: ## scope, then ### section"),
]


@pytest.mark.parametrize(("text", "expected"), REFUSALS)
def test_refusal(text: str, expected: str) -> None:
    result = parse_strings("strings.md", text)
    assert isinstance(result, list)
    assert [str(error) for error in result] == [expected]


def test_the_sites_words_override_the_kits_per_key() -> None:
    kit = {"strings.md": "## bots\n### endings\n- failed: Kit failed.\n- cancelled: Kit cancelled.\n"}
    site = {"strings.md": "## bots\n### endings\n- failed: Site failed.\n### words\n- asking: what, how\n"}
    registry = compile_sources(site, kinds=KINDS, server_name=SERVER, kit=kit)
    assert isinstance(registry, Registry)
    assert dict(registry.strings.section("endings")) == {"failed": "Site failed.", "cancelled": "Kit cancelled."}
    assert registry.strings.get("words", "asking") == "what, how"


def test_a_kit_strings_error_is_the_kits() -> None:
    result = compile_sources({}, kinds=KINDS, server_name=SERVER, kit={"strings.md": "## bots\n### endings\n- nope: x\n"})
    assert isinstance(result, list) and str(result[0]).startswith("kit/strings.md:3: unknown key 'nope'")


def test_the_catalogue_has_every_ending() -> None:
    from engine.core.messages import ENDINGS

    assert tuple(CATALOGUE["endings"]) == ENDINGS


@pytest.mark.parametrize(
    ("words", "said"),
    [
        ("Stopped {}.", "unknown placeholder {}"),
        ("In {Room}.", "unknown placeholder {Room}"),
        ("In {room.name}.", "unknown placeholder {room.name}"),
        ("In {room!r}.", "placeholder {room} takes no format or conversion"),
        ("In {room:>9}.", "placeholder {room} takes no format or conversion"),
        ("In {room", "a stray brace"),
        ("In room}", "a stray brace"),
    ],
)
def test_a_placeholder_format_would_choke_on_fails_the_compile(words: str, said: str) -> None:
    result = parse_strings("strings.md", f"## bots\n### context\n- room: {words}\n")
    assert isinstance(result, list) and len(result) == 1
    assert said in str(result[0]) and str(result[0]).startswith("strings.md:3: 'room' in ### context:")


def test_literal_braces_are_written_doubled() -> None:
    result = parse_strings("strings.md", "## bots\n### context\n- room: In {room} {{not a field}}.\n")
    assert not isinstance(result, list)
    assert (result.get("context", "room") or "").format(room="Lobby") == "In Lobby {not a field}."
