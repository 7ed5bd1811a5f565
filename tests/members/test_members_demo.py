"""The demo's stand-in scripts (``make dev``): the builder's tools driven from a member's words, and the
stand-in saying what the tool said. Pure."""

from __future__ import annotations

from pathlib import Path

import pytest

from appservice.config import parse_config
from appservice.dev import with_members
from appservice.kinds import KINDS
from appservice.members.charter import read_charter
from appservice.members.runs import ASK, charter_note
from appservice.stand_in import member_bots_book, stand_in_builder
from engine.clock import FakeClock
from engine.content import Registry
from engine.content.files import compile_content
from engine.core.messages import Message, ModelRequest, ToolSpec
from engine.core.prompt import opening
from engine.providers.mock import MockModel, StandInModel

REPO = Path(__file__).resolve().parents[2]


def call(text: str, bot_id: str | None = None) -> dict:  # type: ignore[type-arg]
    turns = stand_in_builder(text, bot_id)
    return turns[0]["tool_calls"][0]


def test_a_request_becomes_create_bot_with_its_schedule_and_sites() -> None:
    made = call("make me a news digest every 2 minutes from rte.ie and https://www.theguardian.com/uk")
    assert made["name"] == "create_bot"
    assert made["arguments"]["schedule"] == {"every": "2 minutes"}
    assert made["arguments"]["sources"] == ["rte.ie", "https://www.theguardian.com/uk"]


def test_in_a_bots_room_a_change_names_the_bot_and_only_what_changes() -> None:
    changed = call("make it daily at 8", "mb_x")
    assert changed["arguments"] == {"schedule": {"at": "08:00", "tz": "UTC"}, "bot_id": "mb_x"}
    assert call("rename it Evening Post", "mb_x")["arguments"] == {"name": "Evening Post", "bot_id": "mb_x"}
    assert call("remove this bot", "mb_x") == {"id": "d1", "name": "remove_bot", "arguments": {"bot_id": "mb_x"}}


async def test_the_stand_in_says_what_the_tool_said() -> None:
    request = ModelRequest(system="", messages=(
        Message(role="user", text="make me a bot"), Message(role="tool", text="Made 📰 News (bot_id mb_1).", call_id="d1")))
    clock = FakeClock()
    [step] = await StandInModel(lambda _: stand_in_builder("x", None), MockModel(clock), clock).answer(request, turn=1)
    assert step.text == "(The stand-in model, by the demo's script:) Made 📰 News (bot_id mb_1)."


def test_an_edition_script_reads_every_source_then_composes_its_card() -> None:
    charter = read_charter({"name": "N", "glyph": "📰", "schedule": {"every": "1 hour"}, "prompt": "p",
                            "sources": ["rte.ie"], "allow": ["https://www.rte.ie/feeds/"], "owner": "@a:x",
                            "author": "@a:x"})
    # What the edition's run is asked, as the worker opens it: the charter's note, then the ask.
    note = charter_note("mb_1", charter, edition=True)
    request = ModelRequest(system="", messages=opening({"kind": "member", "lines": [], "note": note}, ASK),
                           tools=(ToolSpec("fetch"), ToolSpec("card")))
    turns = member_bots_book(request)
    assert turns is not None
    assert [c["name"] for c in turns[0]["tool_calls"]] == ["fetch"]
    assert [c["arguments"]["url"] for c in turns[0]["tool_calls"]] == list(charter.fetches)
    assert turns[1]["tool_calls"][0]["arguments"]["card"] == {"heading": "📰 N", "blocks": [
        {"type": "text", "text": "The stand-in model read these for this edition."}, {"type": "list", "items": ["rte.ie"]}]}


def test_a_line_said_to_the_builder_drives_its_tools_with_the_bot_it_was_said_about() -> None:
    charter = read_charter({"name": "N", "glyph": "📰", "schedule": {"every": "1 hour"}, "prompt": "p",
                            "owner": "@a:x", "author": "@a:x"})
    note = charter_note("mb_x", charter, edition=False)
    lines = [{"name": "ann", "said": "rename it Evening Post"}]
    request = ModelRequest(system="", messages=opening({"kind": "timeline", "lines": lines, "note": note},
                                                       "rename it Evening Post"), tools=(ToolSpec("create_bot"),))
    turns = member_bots_book(request)
    assert turns is not None and turns[0]["tool_calls"][0]["arguments"] == {"name": "Evening Post", "bot_id": "mb_x"}
    # Nobody else's run is the builder's: a run offered no builder tool is not scripted.
    assert member_bots_book(ModelRequest(system="", messages=(Message("user", "ann: rename it X"),))) is None


def test_make_dev_turns_member_bots_on_over_the_content_as_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUMMON_RUN_DIR", str(tmp_path))
    config = parse_config({
        "homeserver": {"url": "http://127.0.0.1:1", "server_name": "localhost"},
        "appservice": {"address": "http://127.0.0.1:2", "as_token": "a" * 20, "hs_token": "h" * 20},
        "database": {"dsn": "postgresql://x/y"}, "content": {"dir": str(REPO / "content")}}, {})
    demo = with_members(config)
    assert demo.members is not None and demo.members.min_every_seconds == 60
    registry = compile_content(Path(demo.content.dir), kinds=KINDS, server_name="localhost", fetch_spec=None)
    assert isinstance(registry, Registry), registry
    assert registry.get("builder") is not None and registry.get("helper") is not None
    assert not (REPO / "content" / "bots" / "builder.md").exists()  # content/ itself is left alone
