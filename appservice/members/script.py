"""The stand-in model's script for a member bot's editions (``make dev`` and the tests: never ``summon
serve``): read each source, compose a card that says where it read, write a line. A real model reads the
sources and writes the digest; the stand-in shows the pipeline working end to end."""

from __future__ import annotations

import re
from typing import Any

from engine.members.charter import Charter


def stand_in_edition(charter: Charter) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    if charter.fetches:
        turns.append({"tool_calls": [{"id": f"f{n}", "name": "fetch", "arguments": {"url": url}}
                                     for n, url in enumerate(charter.fetches)]})
    if charter.card and "card" in charter.tools:
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
    """What the stand-in model does with a line said to the builder (``make dev`` only): reads the schedule,
    the sites and a new name from the words, and calls the builder's tools as a real model would."""
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
