"""Fuzz: the content compiler — any set of files a site may write (good, half-good, mangled, not even
front matter): no exception, every case within 100 ms, and what does not compile is refused as
``path:line: message``, each naming one of the files it was given, in one clear line."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from appservice.kinds import KINDS
from engine.content import Registry, compile_sources
from engine.content.base import CompileError
from engine.content.files import read_kit
from tests.fuzz.budget import FUZZ, clear, outcome, within_budget

SERVER = "example.org"
KIT = read_kit()
KEYS = {
    "bots": ["name", "surfaces", "for", "serves", "hears", "tools", "skills", "limits", "memory", "endings", "voice",
             "extends", "model", "glyph", "avatar", "offer", "answers"],
    "skills": ["name", "description", "for", "when"],
    "tools": ["name", "description", "for", "kind", "openapi", "operation", "code", "needs", "args"],
    "commands": ["hint", "bot", "tool", "for", "surfaces", "args"],
}
WORD = st.sampled_from([
    "Helper", "helper", "rooms", "desk", "voice", "anyone", "member", "moderator", "admin", "user:@ann:example.org",
    "mention", "site.purchase.paid", "member.joined", "day", "1 minute", "10:30", "08:00", "UTC", "Mars/Olympus",
    "!abc:example.org", "#general:example.org", "fetch", "about_me", "all", "none", "thread", "person", "2d",
    "span", "choice", "text", "number", "boolean", "short", "me", "yes", "no", "off", "~", "null", "1e3", "-1",
    "0", "99999999999999999999", "", " ", "é", "{x}", "{", "a: b", "- x", "https://example.org/spec.yaml",
])
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats(allow_nan=False, width=32) | WORD
    | st.text(max_size=12),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(
        st.sampled_from(["every", "at", "on", "in", "ask", "event", "steps", "spend", "per", "day", "name", "kind",
                         "label", "default", "choices", "schedule", "until", "zone", "interval"]) | st.text(max_size=6),
        children, max_size=4),
    max_leaves=12,
)
# YAML an author might get wrong, and YAML's own oddities.
_YAML_PIECES = st.sampled_from([
    "\n", "  ", "\t", ": ", "- ", "[", "]", "{", "}", ",", "'", '"', "#", "&a ", "*a", "!!str ", "!!python/object ",
    "? ", "|", ">", "---", "...", "name", "hears", "for", "limits", "args", "x", "\\", "%YAML 1.2", "\ufeff", "\x00",
])


# Files that compile, each then given one value of any shape (or left alone).
GOOD: list[tuple[str, dict[str, Any], str]] = [
    ("bots/helper.md", {"name": "Helper", "for": "anyone", "hears": ["mention"],
                        "limits": {"steps": 8, "spend": 0.25, "per": {"day": 1.0}}}, "You help."),
    ("bots/scribe.md", {"name": "Scribe", "surfaces": ["rooms"], "hears": [
        {"schedule": {"every": "day", "at": "09:00"}, "in": "!abc:example.org", "ask": "Sum up."}]}, "You write."),
    ("commands/summarise.md", {"hint": "Catch up", "bot": "helper", "for": "member", "args": [
        {"name": "since", "kind": "span", "label": "How far back", "default": "1d"},
        {"name": "length", "kind": "choice", "label": "How long", "choices": ["short", "detailed"],
         "default": "short"}]}, "Catch up on {since}, {length}."),
    ("skills/tone.md", {"description": "How to sound"}, "Be kind."),
]


@st.composite
def good_files(draw: st.DrawFn) -> tuple[str, str]:
    path, front, body = draw(st.sampled_from(GOOD))
    front = dict(front)
    if draw(st.booleans()):
        front[draw(st.sampled_from(sorted(front)))] = draw(VALUES)
    return path, "---\n" + yaml.safe_dump(front, sort_keys=False, allow_unicode=True) + "---\n" + body + "\n"


@st.composite
def files(draw: st.DrawFn) -> tuple[str, str]:
    if draw(st.booleans()):
        return draw(good_files())
    folder = draw(st.sampled_from([*KEYS, "other"]))
    stem = draw(st.sampled_from(["helper", "b", "summarise", "Bad Name", "x.y", "é", "desk", "privacy", ""]))
    path = draw(st.sampled_from([f"{folder}/{stem}.md", "strings.md", f"{folder}/{stem}.txt", f"{folder}/a/{stem}.md"]))
    shape = draw(st.sampled_from(["front", "front", "front", "mangled", "pieces", "text"]))
    body = draw(st.text(max_size=80))
    if shape == "text":
        return path, draw(st.text(max_size=300))
    if shape == "pieces":
        return path, "---\n" + "".join(draw(st.lists(_YAML_PIECES, max_size=40))) + "\n---\n" + body
    keys = KEYS.get(folder, KEYS["bots"])
    front: dict[str, Any] = draw(st.dictionaries(st.sampled_from([*keys, "colour"]), VALUES, max_size=6))
    if folder == "bots" and draw(st.booleans()):
        front.setdefault("name", draw(WORD))
    try:
        head = yaml.safe_dump(front, sort_keys=False, allow_unicode=True)
    except yaml.YAMLError:
        head = "name: x\n"
    if shape == "mangled":
        at = draw(st.integers(0, len(head)))
        head = head[:at] + draw(_YAML_PIECES) + head[at:]
    return path, f"---\n{head}---\n{body}\n"


def _compile(sources: dict[str, str], with_kit: bool) -> Registry | list[CompileError]:
    return compile_sources(sources, kinds=KINDS, server_name=SERVER, kit=KIT if with_kit else None)


@FUZZ
@given(st.lists(files(), min_size=1, max_size=4).map(dict), st.booleans())
def test_any_content_compiles_or_is_refused_clearly_in_time(sources: dict[str, str], with_kit: bool) -> None:
    size = sum(len(text) for text in sources.values())
    result = within_budget("content compiler", lambda: _compile(sources, with_kit), size)
    if isinstance(result, Registry):
        outcome("content compiler", "compiled")
        return
    outcome("content compiler", "refused")
    assert result, "refused with no error"
    for error in result:
        assert isinstance(error, CompileError)
        assert error.path in sources or error.path.startswith("kit/"), error
        assert isinstance(error.line, int) and error.line >= 0, error
        assert clear(error.message), str(error)
