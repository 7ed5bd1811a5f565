"""The stand-in model's books for ``summon dev`` (and the tests): never read by ``summon serve``.

A book (``engine.providers.mock.StandInBook``) reads a model call's request and gives the turns its run is
answered by, so a newcomer sees the machine work without a key: the demo's shipped scripts (``demo.yaml``)
make the stand-in call a tool, offer choices, take a slow step and answer a command; the member bots' book
writes an edition by reading each source and composing a card, and drives the builder's tools from what a
person said to it. A real model does all this from the same request.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from appservice.members.runs import ASK
from engine.core.messages import ModelRequest
from engine.providers.mock import StandInBook, asked, parse_script

DEMO_SCRIPTS = Path(__file__).with_name("demo.yaml")


def demo_entries(path: Path = DEMO_SCRIPTS) -> list[dict[str, Any]]:
    """The demo's shipped scripts, each checked as the stand-in would read it."""
    entries = yaml.safe_load(path.read_text(encoding="utf-8"))
    for entry in entries:
        parse_script(entry["turns"])
    return list(entries)


def lines_of(request: ModelRequest) -> list[str]:
    """The run's opening, a line at a time (a transcript line is ``name: said``)."""
    return asked(request).splitlines()


def demo_book(entries: list[dict[str, Any]], *, demo_user: str,
              commands: Callable[[], Collection[str]]) -> StandInBook:
    """The demo's scripts, by what the demo user said: the first shipped entry whose words their line has; None
    (the stand-in's own answer) for anything else — and for anybody else's line: a script makes the stand-in call
    tools, and anyone else who can reach the dev homeserver is a stranger. A mention is the opening's last line
    (``demo: …``); a command's run ends with the command's own words, so an entry for ``!name`` reads the demo
    user's last line, and applies only while ``commands()`` (those published) has it, so a command that failed
    to publish is not masked by its script."""
    speakers = (f"{demo_user}: ", f"{demo_user.lstrip('@').split(':', 1)[0]}: ")

    def turns(request: ModelRequest) -> Sequence[Mapping[str, Any]] | None:
        lines = lines_of(request)
        last = lines[-1] if lines else ""
        theirs = next((line for line in reversed(lines) if line.startswith(speakers)), None)
        for entry in entries:
            for words in (str(w).lower() for w in entry["when"]):
                if words.startswith("!"):
                    said = theirs.partition(": ")[2].lower() if theirs is not None else ""
                    if said.lstrip().startswith(words) and words[1:].split()[0] in commands():
                        return list(entry["turns"])
                elif last.startswith(speakers) and words in last.partition(": ")[2].lower():
                    return list(entry["turns"])
        return None

    return turns


# --- member bots -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SeenCharter:
    """What a member bot's run shows of its charter (its standing note, ``appservice.members.runs.charter_note``)."""

    name: str
    glyph: str
    sources: tuple[str, ...]
    fetches: tuple[str, ...]
    card: bool  # the edition composes a card with the card tool
    bot_id: str | None


_BOT = re.compile(r"^This is the member bot (\S+) (.+?)(?: \(bot_id ([^)]+)\))?, made for ", re.MULTILINE)
_SOURCES = re.compile(r"^Its sources, as named: (.*)\.$", re.MULTILINE)
_FETCHES = re.compile(r"^What it may fetch \(read each of these\): (.*)$", re.MULTILINE)
_CARD = "compose one card with the card tool"


def seen_charter(request: ModelRequest) -> SeenCharter | None:
    """The charter a member bot's run opens with, or None (no member bot's run)."""
    text = asked(request)
    bot = _BOT.search(text)
    if bot is None:
        return None
    sources, fetches = _SOURCES.search(text), _FETCHES.search(text)
    return SeenCharter(name=bot.group(2), glyph=bot.group(1), bot_id=bot.group(3),
                       sources=tuple(sources.group(1).split(", ")) if sources else (),
                       fetches=tuple(fetches.group(1).split(", ")) if fetches else (), card=_CARD in text)


def stand_in_edition(charter: SeenCharter) -> list[dict[str, Any]]:
    """An edition, as the stand-in writes it: read each source, compose a card that says where it read, a line."""
    turns: list[dict[str, Any]] = []
    if charter.fetches:
        turns.append({"tool_calls": [{"id": f"f{n}", "name": "fetch", "arguments": {"url": url}}
                                     for n, url in enumerate(charter.fetches)]})
    if charter.card:
        blocks: list[dict[str, Any]] = [{"type": "text", "text": "The stand-in model read these for this edition."}]
        if charter.sources:
            blocks.append({"type": "list", "items": list(charter.sources)})
        turns.append({"tool_calls": [{"id": "c1", "name": "card", "arguments": {"card": {
            "heading": f"{charter.glyph} {charter.name}", "blocks": blocks}}}]})
    turns.append({"text": f"{charter.name}: this edition was put together by the stand-in model from "
                          f"{len(charter.fetches)} source(s)."})
    return turns


_EVERY = re.compile(r"every\s+(\d+)\s*(minute|min|hour|hr)s?", re.IGNORECASE)
_AT = re.compile(r"(?:daily|every\s+(?:day|morning)|each\s+morning)?\s*at\s+(\d{1,2})(?::(\d{2}))?\s*(am|pm)?",
                 re.IGNORECASE)
_SITE = re.compile(r"\b((?:https?://)?[a-z0-9-]+(?:\.[a-z0-9-]+)+(?:/\S*)?)", re.IGNORECASE)
_RENAME = re.compile(r"(?:rename it|call it|change (?:its name|the name) to)\s+[\"“]?([^\"”.!?]+)", re.IGNORECASE)


def _schedule(text: str) -> dict[str, str] | None:
    every = _EVERY.search(text)
    if every:
        return {"every": f"{every.group(1)} {'hours' if every.group(2).lower().startswith('h') else 'minutes'}"}
    at = _AT.search(text)
    if at and ("daily" in text.lower() or "morning" in text.lower() or "day" in text.lower()):
        hour = int(at.group(1)) % 24
        if (at.group(3) or "").lower() == "pm" and hour < 12:
            hour += 12
        return {"at": f"{hour:02d}:{at.group(2) or '00'}", "tz": "UTC"}
    return None


def stand_in_builder(text: str, bot_id: str | None) -> list[dict[str, Any]]:
    """What the stand-in model does with a line said to the builder: reads the schedule, the sites and a new
    name from the words, and calls the builder's tools as a real model would."""
    lowered = text.lower()
    if bot_id is not None and ("remove" in lowered or "delete" in lowered):
        call = {"id": "d1", "name": "remove_bot", "arguments": {"bot_id": bot_id}}
    else:
        arguments: dict[str, Any] = {}
        schedule = _schedule(text)
        if schedule is not None:
            arguments["schedule"] = schedule
        sites = [m.group(1).rstrip(".,;") for m in _SITE.finditer(text)]
        if sites:
            arguments["sources"] = sites
        renamed = _RENAME.search(text)
        if renamed:
            arguments["name"] = renamed.group(1).strip()
        if bot_id is not None:
            arguments["bot_id"] = bot_id
        else:
            arguments = {"name": "News Digest", "glyph": "📰", "schedule": {"every": "1 hour"},
                         "prompt": f"Read each source and write a short digest of what is new. (Asked: {text})",
                         **arguments}
        call = {"id": "d1", "name": "create_bot", "arguments": arguments}
    return [{"tool_calls": [call]}, {"text": "(The stand-in model, by the demo's script:)", "echo": True}]


def member_bots_book(request: ModelRequest) -> Sequence[Mapping[str, Any]] | None:
    """Editions and dry runs (a run asked to write its edition) by ``stand_in_edition``; a line said to the
    builder (a run offered ``create_bot``: in its room with the person, or a member bot's) by
    ``stand_in_builder``, with the member bot's id when said in that bot's room."""
    lines = lines_of(request)
    charter = seen_charter(request)
    if lines and lines[-1] == ASK:
        return stand_in_edition(charter) if charter is not None else None
    if any(tool.name == "create_bot" for tool in request.tools) and lines:
        return stand_in_builder(lines[-1].partition(": ")[2] or lines[-1], charter.bot_id if charter else None)
    return None
