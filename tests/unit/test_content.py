"""The content compile: every refusal at its exact path:line, defaults, the shipped demo bots."""

from __future__ import annotations

import ast
import dataclasses
import types
from pathlib import Path

import pytest
from pydantic import ValidationError

from appservice.desk.kind import ANSWERS, answers_on_desk
from appservice.kinds import KINDS
from engine.content import Bot, CompileError, Limits, Registry, compile_sources
from engine.content.audience import Term
from engine.content.files import ContentFileError, check, read_content

SERVER = "example.org"
CONTENT = Path(__file__).resolve().parents[2] / "content"


def bot(front: str, body: str = "Be helpful.") -> str:
    return f"---\n{front}---\n{body}\n"


def errors_of(sources: dict[str, str]) -> list[str]:
    compiled = compile_sources(sources, kinds=KINDS, server_name=SERVER)
    assert isinstance(compiled, list), f"expected errors, it compiled: {compiled}"
    assert all(isinstance(error, CompileError) for error in compiled)
    return [str(error) for error in compiled]


def compiled(sources: dict[str, str]) -> Registry:
    result = compile_sources(sources, kinds=KINDS, server_name=SERVER)
    assert isinstance(result, Registry), "\n".join(map(str, result))
    return result


ALLOWED = (
    "(allowed: name, glyph, avatar, surfaces, extends, for, serves, hears, tools, skills, limits, model, memory,"
    " endings, offer, answers, handoff_summary, voice, client_tools)"
)

# (file text, the one error expected, as path:line: message) — the path is always bots/b.md.
REFUSALS = [
    pytest.param(
        "name: B\n",
        "bots/b.md:1: a content file starts with front matter between '---' lines",
        id="no-front-matter",
    ),
    pytest.param(
        "---\nname: B\nBody\n",
        "bots/b.md:1: the front matter opened at line 1 is never closed with a '---' line",
        id="unclosed",
    ),
    pytest.param(bot("glyph: x\n"), "bots/b.md:1: missing required key 'name'", id="missing-name"),
    pytest.param(bot("name: '  '\n"), "bots/b.md:2: name: cannot be empty", id="empty-name"),
    pytest.param(bot("name: 3\n"), "bots/b.md:2: name: should be text, got 3", id="name-not-text"),
    pytest.param(
        bot("name: B\ncolour: red\n"), f"bots/b.md:3: unknown key 'colour' {ALLOWED}", id="unknown-key"
    ),
    pytest.param(
        bot("name: B\nlimits:\n  steps: 3\n  turns: 2\n"),
        "bots/b.md:5: unknown key 'turns' in limits (allowed: steps, spend, minutes, per)",
        id="unknown-nested-key",
    ),
    pytest.param(
        bot("name: B\nlimits:\n  steps: many\n"),
        "bots/b.md:4: limits.steps: should be a whole number, got 'many'",
        id="steps-not-int",
    ),
    pytest.param(
        bot("name: B\nlimits: {steps: 0}\n"),
        "bots/b.md:3: limits.steps: should be greater than 0, got 0",
        id="steps-zero",
    ),
    pytest.param(
        bot("name: B\nlimits: {steps: 2.5}\n"),
        "bots/b.md:3: limits.steps: should be a whole number, got 2.5",
        id="steps-float",
    ),
    pytest.param(
        bot("name: B\nlimits: {spend: -1}\n"),
        "bots/b.md:3: limits.spend: should be greater than or equal to 0, got -1",
        id="spend-negative",
    ),
    pytest.param(
        bot("name: B\nlimits: {spend: '0.5'}\n"),
        "bots/b.md:3: limits.spend: should be a valid number, got '0.5'",
        id="spend-text",
    ),
    pytest.param(
        bot("name: B\nlimits: {minutes: 0}\n"),
        "bots/b.md:3: limits.minutes: should be greater than 0, got 0",
        id="minutes-zero",
    ),
    pytest.param(
        bot("name: B\nlimits: 5\n"),
        "bots/b.md:3: limits: should be a mapping, got 5",
        id="limits-not-mapping",
    ),
    pytest.param(
        bot("name: B\nsurfaces: [rooms, room]\n"),
        "bots/b.md:3: surfaces[1]: should be 'rooms', 'desk', 'voice', 'members' or 'social', got 'room'",
        id="unknown-surface",
    ),
    pytest.param(
        bot("name: B\nsurfaces: []\n"),
        "bots/b.md:3: surfaces: a bot needs at least one surface (rooms, desk, voice, members or social)",
        id="no-surface",
    ),
    pytest.param(
        bot("name: B\nsurfaces: [desk, desk]\n"),
        "bots/b.md:3: surfaces: 'desk' is listed twice",
        id="surface-twice",
    ),
    pytest.param(
        bot("name: B\nsurfaces: rooms\n"),
        "bots/b.md:3: surfaces: should be a list, got 'rooms'",
        id="surfaces-not-list",
    ),
    pytest.param(
        bot("name: B\nhears: [reaction]\n"),
        "bots/b.md:3: hears[0]: unknown trigger 'reaction' (known: mention, schedule, event, support-message)",
        id="unknown-trigger",
    ),
    pytest.param(
        bot("name: B\nhears: [mention, mention]\n"),
        "bots/b.md:3: hears: 'mention' is listed twice",
        id="trigger-twice",
    ),
    pytest.param(
        bot("name: B\nfor:\n  - member\n  - vip\n"),
        "bots/b.md:5: for: unknown audience class 'vip' (known: anyone, authenticated, local, member, moderator, admin,"
        " customer, subscribed, user:@name:server, server:<name>, tier:<slug>, role:<name>, bought:<product>)",
        id="unknown-audience-in-list",
    ),
    pytest.param(
        bot("name: B\nserves: staff\n"),
        "bots/b.md:3: serves: unknown audience class 'staff'",
        id="unknown-serves",
    ),
    pytest.param(
        bot("name: B\nfor: user:alice\n"),
        "bots/b.md:3: for: 'user:alice' is not a valid audience class: write it as user:@name:server",
        id="bad-user-id",
    ),
    pytest.param(
        bot("name: B\nfor: []\n"), "bots/b.md:3: for: an empty list admits no one", id="empty-audience"
    ),
    pytest.param(
        bot("name: B\nmodel: 5\n"),
        "bots/b.md:3: model: a model is a name, or a mapping of provider to name, not 5",
        id="model-number",
    ),
    pytest.param(
        bot("name: B\nmodel: {}\n"),
        "bots/b.md:3: model: name a model for at least one provider",
        id="model-empty-mapping",
    ),
    pytest.param(
        bot("name: B\nname: C\n"),
        "bots/b.md:3: key 'name' is given twice (first at line 2)",
        id="duplicate-key",
    ),
    pytest.param(bot("name: B\n1: x\n"), "bots/b.md:3: a key must be a word, not '1'", id="number-key"),
    pytest.param(
        bot("- name\n- B\n"),
        "bots/b.md:2: front matter must be a mapping of keys, not a list",
        id="front-is-list",
    ),
    pytest.param(
        bot("name: B\nlimits:\n  steps: [1\n"),
        "bots/b.md:4: front matter is not valid YAML: expected ',' or ']', but got '<stream end>'",
        id="yaml-syntax",
    ),
    pytest.param(
        bot("name: B\nglyph: x: y\n"),
        "bots/b.md:3: front matter is not valid YAML: mapping values are not allowed here",
        id="yaml-colon",
    ),
    pytest.param(
        bot("name: B\n", body="   \n\n"),
        "bots/b.md:3: a bot needs a prompt: the body is empty",
        id="empty-body",
    ),
]


@pytest.mark.parametrize(("text", "expected"), REFUSALS)
def test_each_refusal_names_its_line(text: str, expected: str) -> None:
    errors = errors_of({"bots/b.md": text})
    assert len(errors) == 1, errors
    assert errors[0].startswith(expected), errors[0]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("bots/Helper.md", "bots/Helper.md:1: the file name is the bot's slug: 'Helper' must be lowercase"),
        ("skills/Refunds.md", "skills/Refunds.md:1: the file name is the skill's name: 'Refunds' must be lowercase"),
        ("bots/my bot.md", "bots/my bot.md:1: the file name is the bot's slug: 'my bot'"),
        ("bots/-x.md", "bots/-x.md:1: the file name is the bot's slug: '-x'"),
        ("bots/team/x.md", "bots/team/x.md:1: a bot file lives directly in bots/, not in a folder below it"),
        (
            "bots/" + "a" * 250 + ".md",
            "bots/" + "a" * 250 + ".md:1: the slug '" + "a" * 250 + "' is too long",
        ),
    ],
)
def test_file_name_must_be_a_slug(path: str, expected: str) -> None:
    errors = errors_of({path: bot("description: d\n" if path.startswith("skills/") else "name: B\n")})
    assert len(errors) == 1, errors
    assert errors[0].startswith(expected)


def test_every_error_in_every_file_is_reported_in_order() -> None:
    errors = errors_of(
        {
            "bots/b.md": bot("name: B\ncolour: red\nlimits: {steps: 0}\n", body=""),
            "bots/a.md": "no front matter\n",
            "bots/fine.md": bot("name: Fine\n"),
        }
    )
    assert [error.split(": ")[0] for error in errors] == [
        "bots/a.md:1",
        "bots/b.md:3",
        "bots/b.md:4",
        "bots/b.md:5",
    ]
    assert "unknown key 'colour'" in errors[1]
    assert "limits.steps" in errors[2]
    assert "the body is empty" in errors[3]


def test_a_valid_bot_gets_the_defaults() -> None:
    registry = compiled({"bots/helper.md": bot("name: Helper\n", body="\n  You help.  \n")})
    helper = registry.get("helper")
    assert isinstance(helper, Bot)
    assert helper.slug == "helper"
    assert helper.name == "Helper"
    assert helper.user_id == "@bot_helper:example.org"
    assert helper.glyph is None
    assert helper.surfaces == ("rooms",)
    assert helper.audience is None
    assert helper.serves is None
    assert helper.hears == ("mention",)
    assert helper.limits == Limits(steps=12, spend=0.50, minutes=10.0)
    assert helper.limits.per == {}
    assert helper.model is None
    # The seeds' defaults: memory of the thread, not offered, a draft on the desk, direct in a room.
    assert (helper.memory, helper.offer, helper.answers) == ("thread", "off", None)
    assert (answers_on_desk(helper), ANSWERS.of(helper)) == ("draft", None)  # on the desk it drafts; nowhere else is asked
    assert (helper.tools, helper.skills, helper.extends, helper.voice, helper.avatar) == ((), (), None, None, None)
    assert helper.endings == {}
    assert helper.prompt == "You help."
    assert helper.source_path == "bots/helper.md"


def test_every_field_set() -> None:
    front = (
        "name: Full\nglyph: '🤖'\nsurfaces: [rooms, desk, voice]\nfor: [member, 'user:@ann:example.org']\n"
        "serves: local\nhears: [mention]\nlimits: {steps: 3, spend: 1, minutes: 2.5}\n"
        "model:\n  openai: gpt-4o-mini\n  anthropic: claude-haiku\n"
    )
    full = compiled({"bots/full.md": bot(front)}).get("full")
    assert full is not None
    assert full.glyph == "🤖"
    assert full.surfaces == ("rooms", "desk", "voice")
    assert full.audience is not None and full.audience.terms == (
        Term("member"),
        Term("user", "@ann:example.org"),
    )
    assert full.serves is not None and full.serves.terms == (Term("local"),)
    assert full.limits == Limits(steps=3, spend=1.0, minutes=2.5)
    assert full.model == {"openai": "gpt-4o-mini", "anthropic": "claude-haiku"}
    # Written back, the audience reads as the author wrote it.
    dumped = full.model_dump(by_alias=True)
    assert dumped["for"] == ["member", "user:@ann:example.org"]
    assert dumped["serves"] == "local"


def test_yaml_1_1_booleans_stay_words() -> None:
    # `offer: off`, `memory: none`, `on: mon` must survive as words, not become false/true.
    bots = compiled({"bots/b.md": bot("name: off\nglyph: yes\n")})
    only = bots.get("b")
    assert only is not None
    assert (only.name, only.glyph) == ("off", "yes")


def test_windows_line_endings_keep_line_numbers() -> None:
    errors = errors_of({"bots/b.md": "---\r\nname: B\r\n\r\ncolour: red\r\n---\r\nBody\r\n"})
    assert errors == [f"bots/b.md:4: unknown key 'colour' {ALLOWED}"]


def test_a_file_that_is_no_kind_of_content_is_refused() -> None:
    assert errors_of({"bots/b.md": bot("name: B\n"), "bots/notes.txt": "", "readme.md": "hi"}) == [
        f"{path}:1: not a content file: content holds bots/, skills/, tools/ and commands/ (one .md per thing)"
        " and strings.md"
        for path in ("bots/notes.txt", "readme.md")
    ]


def test_registry_is_ordered_and_immutable() -> None:
    registry = compiled({f"bots/{slug}.md": bot(f"name: {slug}\n") for slug in ("zed", "alpha", "mid")})
    assert [b.slug for b in registry] == ["alpha", "mid", "zed"]
    assert list(registry.bots) == ["alpha", "mid", "zed"]
    assert len(registry) == 3 and "mid" in registry and "nobody" not in registry
    assert registry.get("nobody") is None
    assert isinstance(registry.bots, types.MappingProxyType)
    with pytest.raises(TypeError):
        registry.bots["x"] = registry.bots["alpha"]  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        registry.server_name = "other"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        registry.bots["alpha"].name = "renamed"


def test_compile_error_prints_as_path_line_message() -> None:
    assert str(CompileError("bots/x.md", 7, "bad")) == "bots/x.md:7: bad"


def test_the_shipped_demo_bots_compile() -> None:
    sources = read_content(CONTENT)
    assert {"bots/helper.md", "bots/echo.md"} <= set(sources)
    registry = compiled(sources)
    helper, echo = registry.get("helper"), registry.get("echo")
    assert helper is not None and echo is not None
    assert helper.name == "Helper" and helper.audience is not None and str(helper.audience) == "anyone"
    assert echo.name == "Echo" and echo.audience is not None and str(echo.audience) == "member"
    assert "repeat" in echo.prompt.lower()
    assert check(CONTENT, SERVER, kinds=KINDS) == []


def test_check_prints_every_error_under_the_root(tmp_path: Path) -> None:
    bots = tmp_path / "bots"
    bots.mkdir()
    (bots / "good.md").write_text(bot("name: Good\n"), encoding="utf-8")
    (bots / "bad.md").write_text(bot("name: Bad\nfor: vip\n"), encoding="utf-8")
    (bots / "latin.md").write_bytes(b"---\nname: caf\xe9\n---\nx\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x.md").write_text("ignored", encoding="utf-8")
    lines = check(tmp_path, SERVER, kinds=KINDS)
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"{tmp_path.as_posix()}/bots/latin.md:1: not UTF-8 text")
    assert lines[1].startswith(f"{tmp_path.as_posix()}/bots/bad.md:3: for: unknown audience class 'vip'")
    with pytest.raises(ContentFileError) as raised:
        read_content(tmp_path)
    assert [str(error).split(": ")[0] for error in raised.value.errors] == ["bots/latin.md:1"]


def test_check_of_a_missing_folder(tmp_path: Path) -> None:
    assert check(tmp_path / "nope", SERVER, kinds=KINDS) == [f"{tmp_path / 'nope'}: no such content folder"]


def test_read_content_uses_relative_posix_paths(tmp_path: Path) -> None:
    (tmp_path / "bots").mkdir()
    (tmp_path / "bots" / "a.md").write_text("A", encoding="utf-8")
    (tmp_path / "strings.md").write_text("S", encoding="utf-8")
    (tmp_path / "bots" / "skip.txt").write_text("no", encoding="utf-8")
    assert read_content(tmp_path) == {"bots/a.md": "A", "strings.md": "S"}


FORBIDDEN_IMPORTS = {
    "os",
    "pathlib",
    "io",
    "asyncio",
    "aiohttp",
    "asyncpg",
    "httpx",
    "mautrix",
    "frontmatter",
}


# The compiler is pure; reading the files and watching them are the package's two I/O modules.
CONTENT_IO = ("files.py", "watch.py")


def test_the_content_io_modules_exist() -> None:
    for name in CONTENT_IO:
        assert (CONTENT.parent / "engine" / "content" / name).is_file()


@pytest.mark.parametrize(
    "module",
    sorted(p for p in (CONTENT.parent / "engine" / "content").glob("*.py") if p.name not in CONTENT_IO),
    ids=lambda p: p.name,
)
def test_content_core_is_pure(module: Path) -> None:
    tree = ast.parse(module.read_text(encoding="utf-8"))
    imported = {
        name.split(".")[0]
        for node in ast.walk(tree)
        for name in (
            [alias.name for alias in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else []
        )
    }
    assert not imported & FORBIDDEN_IMPORTS, f"{module.name} imports {imported & FORBIDDEN_IMPORTS}"
    assert "open(" not in module.read_text(encoding="utf-8")
