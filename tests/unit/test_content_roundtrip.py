"""The way back: a compiled bot (skill, tool, command) → its file's text, writing only what differs from
the defaults, and ``compile(write(x)) == x`` — for every shipped file and for generated ones."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from appservice.kinds import KINDS
from engine.content import Registry, compile_sources, write_bot, write_command, write_skill, write_tool
from engine.content.files import KIT_DIR, compile_content, read_content, read_kit
from engine.core.messages import ENDINGS

SERVER = "example.org"
CONTENT = Path(__file__).resolve().parents[2] / "content"
SPEC = """\
openapi: 3.0.0
info: {title: Pets, version: '1'}
servers: [{url: 'https://pets.example.org/v1'}]
paths:
  /pets:
    get: {operationId: listPets}
"""


def compiled(sources: dict[str, str], **options: Any) -> Registry:
    result = compile_sources(sources, kinds=KINDS, server_name=SERVER, kit=KIT, **options)
    assert isinstance(result, Registry), "\n".join(map(str, result))
    return result


def shipped() -> Registry:
    result = compile_content(CONTENT, kinds=KINDS, server_name=SERVER, fetch_spec=None)
    assert isinstance(result, Registry), "\n".join(map(str, result))
    return result


SHIPPED = shipped()
KIT = read_kit()


@pytest.mark.parametrize("slug", [*SHIPPED.bots, *(f"kit:{slug}" for slug in SHIPPED.kit_bots)])
def test_every_shipped_bot_round_trips(slug: str) -> None:
    if slug.startswith("kit:"):
        original = SHIPPED.kit_bots[slug.removeprefix("kit:")]
        kit = {**read_kit(), original.source_path.removeprefix("kit/"): write_bot(original)}
        again = compile_sources(read_content(CONTENT), kinds=KINDS, server_name=SERVER, kit=kit)
        assert isinstance(again, Registry), again
        assert again.kit_bots[original.slug] == original
    else:
        original = SHIPPED.bots[slug]
        again = compiled({**read_content(CONTENT), original.source_path: write_bot(original)})
        assert again.bots[slug] == original
    assert write_bot(original).startswith("---\nname: ")


def test_every_shipped_skill_and_command_round_trips() -> None:
    sources = read_content(CONTENT)
    assert SHIPPED.skills and SHIPPED.commands
    for skill in SHIPPED.skills.values():
        path = skill.source_path
        if path.startswith("kit/"):
            kit = {**read_kit(), path.removeprefix("kit/"): write_skill(skill)}
            again = compile_sources(sources, kinds=KINDS, server_name=SERVER, kit=kit)
        else:
            again = compile_sources({**sources, path: write_skill(skill)}, kinds=KINDS, server_name=SERVER, kit=read_kit())
        assert isinstance(again, Registry) and again.skills[skill.name] == skill
    for command in SHIPPED.commands.values():
        again = compiled({**sources, command.source_path: write_command(command)})
        assert again.commands[command.name] == command


def test_a_tool_round_trips() -> None:
    text = "---\ndescription: Look up pets.\nopenapi: tools/pets.yaml\noperations: [listPets]\nfor: member\n---\nNotes.\n"
    first = compiled({"tools/pets.md": text}, referenced={"tools/pets.yaml": SPEC})
    tool = first.tools["pets"]
    assert write_tool(tool) == text
    again = compiled({"tools/pets.md": write_tool(tool)}, referenced={"tools/pets.yaml": SPEC})
    assert again.tools["pets"] == tool


PEOPLE_SPEC = SPEC + """\
  /people/{user}/pets:
    get:
      operationId: petsOf
      parameters: [{name: user, in: path, required: true, schema: {type: string}}]
"""


@pytest.mark.parametrize("text", [
    "---\nopenapi: tools/pets.yaml\noperations: [petsOf]\nsubject: user\n---\n",
    "---\nopenapi: tools/pets.yaml\noperations: [listPets]\npersonal: true\n---\n",
])
def test_a_personal_tool_round_trips(text: str) -> None:
    first = compiled({"tools/pets.md": text}, referenced={"tools/pets.yaml": PEOPLE_SPEC})
    tool = first.tools["pets"]
    assert tool.is_personal and write_tool(tool) == text
    again = compiled({"tools/pets.md": write_tool(tool)}, referenced={"tools/pets.yaml": PEOPLE_SPEC})
    assert again.tools["pets"] == tool


def test_a_builtins_own_file_round_trips() -> None:
    text = "---\nfor: moderator\nneeds: desk\n---\nOnly moderators, on the desk.\n"
    tool = compiled({"tools/fetch.md": text}).tools["fetch"]
    assert tool.kind == "builtin" and not tool.is_personal and write_tool(tool) == text
    assert compiled({"tools/fetch.md": write_tool(tool)}).tools["fetch"] == tool
    assert compiled({"tools/about_me.md": "---\nfor: member\n---\n"}).tools["about_me"].is_personal


def test_only_what_differs_from_the_defaults_is_written() -> None:
    text = "---\nname: B\nsurfaces: [rooms]\nmemory: thread\noffer: 'off'\nlimits: {steps: 12, spend: 0.3}\n---\nBe helpful.\n"
    written = write_bot(compiled({"bots/b.md": text}).bots["b"])
    assert written == "---\nname: B\nlimits: {spend: 0.3}\n---\nBe helpful.\n"


def test_words_yaml_would_misread_are_written_so_they_read_back() -> None:
    text = "---\nname: 'off'\nglyph: 'yes'\nhears:\n- schedule: {every: day, at: '10:30'}\n  in: '#a:example.org'\n  ask: 'no'\n---\nx\n"
    bot = compiled({"bots/b.md": text}).bots["b"]
    assert compiled({"bots/b.md": write_bot(bot)}).bots["b"] == bot


# Generated bots: every key, in random valid combinations.

WORDS = ["off", "yes", "no", "10:30", "null", "- dash", "it's", "a: b", "#hash", "emoji 🤖", "08:00", "1e3", "Ünïcode", "~"]
TERMS = ["anyone", "authenticated", "local", "member", "moderator", "admin", "customer", "subscribed",
         "user:@ann:example.org", "server:example.org", "tier:gold", "role:staff", "bought:the-book"]
BUILTINS = ["about_me", "fetch", "open_skill", "raise_ticket", "search_site"]
SKILLS = ["handing-over", "i-dont-know", "no-promises", "privacy"]
DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]


def _some(rng: random.Random, items: list[Any]) -> list[Any]:
    return rng.sample(items, rng.randint(0, len(items)))


def _audience(rng: random.Random) -> Any:
    return rng.choice(TERMS) if rng.random() < 0.5 else rng.sample(TERMS, rng.randint(1, 3))


def _schedule(rng: random.Random) -> dict[str, Any]:
    every = rng.choice(["day", "week", "month", "15 minutes", "2 hours"])
    rule: dict[str, Any] = {"every": every}
    if every in ("day", "week", "month"):
        if rng.random() < 0.5:
            rule["at"] = f"{rng.randint(0, 23):02}:{rng.choice([0, 15, 30, 45]):02}"
        if rng.random() < 0.3:
            rule["interval"] = rng.randint(1, 4)
    if every in ("day", "week") and rng.random() < 0.5:
        rule["on"] = rng.sample(DAYS, rng.randint(1, 3))
    if rng.random() < 0.4:
        rule["zone"] = rng.choice(["UTC", "Europe/Dublin", "America/New_York"])
    if rng.random() < 0.3:
        rule["until"] = f"20{rng.randint(26, 40)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}"
    if rng.random() < 0.3:
        rule["except"] = ["2026-12-25", "2027-01-01"][: rng.randint(1, 2)]
    return {"schedule": rule, "in": rng.choice(["!abc:example.org", "#general:example.org"]), "ask": rng.choice(WORDS)}


def generated_bot(seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    front: dict[str, Any] = {"name": rng.choice(WORDS)}
    surfaces = rng.sample(["rooms", "desk", "voice"], rng.randint(1, 3))
    if surfaces != ["rooms"] or rng.random() < 0.2:
        front["surfaces"] = surfaces
    if rng.random() < 0.3:
        front["glyph"] = rng.choice(["🛟", "🤖", "AI", "off"])
    if rng.random() < 0.2:
        front["avatar"] = "mxc://example.org/abcDEF123"
    for key in ("for", "serves"):
        if rng.random() < 0.4:
            front[key] = _audience(rng)
    hears: list[Any] = []
    if rng.random() < 0.7:
        hears.append("mention")
    for _ in range(rng.randint(0, 2)):
        hears.append(_schedule(rng))
    if rng.random() < 0.4:
        hears.append({"event": rng.choice(["member.joined", "member.left", "site.purchase.paid"]), "ask": rng.choice(WORDS)})
    if hears != ["mention"] or rng.random() < 0.2:
        front["hears"] = hears
    if rng.random() < 0.5:
        front["tools"] = _some(rng, BUILTINS)
    if rng.random() < 0.5:
        front["skills"] = "all" if rng.random() < 0.4 else _some(rng, SKILLS)
    limits: dict[str, Any] = {}
    if rng.random() < 0.5:
        limits["steps"] = rng.randint(1, 40)
    if rng.random() < 0.5:
        limits["spend"] = round(rng.uniform(0, 3), 2)
    if rng.random() < 0.5:
        limits["minutes"] = rng.choice([0.5, 1, 2.5, 30])
    per = {w: round(rng.uniform(0, 20), 2) for w in _some(rng, ["minute", "hour", "day", "week", "month"])}
    if "desk" in surfaces and rng.random() < 0.6:
        per = per or {"day": 2.0}
        front["offer"] = rng.choice(["ask", "always"])
    if per:
        limits["per"] = per
    if limits:
        front["limits"] = limits
    if rng.random() < 0.4:
        front["model"] = rng.choice(["gpt-4o-mini", {"openai": "gpt-4o-mini", "anthropic": "claude-haiku"}])
    if rng.random() < 0.5:
        front["memory"] = rng.choice(["none", "thread", "person", "person+recall"])
    if "desk" in surfaces and rng.random() < 0.5:
        front["answers"] = rng.choice(["draft", "directly"])
    if rng.random() < 0.4:
        front["endings"] = {name: rng.choice(WORDS) for name in _some(rng, list(ENDINGS))}
    if "voice" in surfaces and rng.random() < 0.6:
        voice: dict[str, Any] = {"voice": "alloy"}
        if rng.random() < 0.5:
            voice |= {"provider": "openai", "voices": ["alloy", "verse"], "first": "Hello.", "wait": 0.8}
        front["voice"] = voice
    if rng.random() < 0.3:
        front["extends"] = "desk"
    return front


def generated_body(seed: int) -> str:
    rng = random.Random(-seed)
    return "\n".join(rng.choice([*WORDS, "A line.", "", "  indented", "---x"]) for _ in range(rng.randint(1, 6))).strip() or "x"


@pytest.mark.parametrize("seed", range(300))
def test_generated_bots_round_trip(seed: int) -> None:
    text = "---\n" + yaml.safe_dump(generated_bot(seed), sort_keys=False, allow_unicode=True) + "---\n" + generated_body(seed) + "\n"
    bot = compiled({"bots/b.md": text}).bots["b"]
    written = write_bot(bot)
    again = compiled({"bots/b.md": written}).bots["b"]
    assert again == bot, written
    assert write_bot(again) == written  # writing is stable


def test_the_kit_is_where_the_tests_read_it() -> None:
    assert (KIT_DIR / "bots" / "desk.md").is_file()
