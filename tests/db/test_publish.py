"""Publish on a real PostgreSQL: the registry projected into its rows in one transaction — every kind,
which skills and tools each bot has, withdrawal of what is gone, and nothing at all when it fails."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from appservice.kinds import KINDS
from engine.content import Registry, compile_sources
from engine.content.files import compile_content, read_content, read_kit
from engine.run.publish import publish
from engine.store.queries import Queries
from tests.store import TestStore

pytestmark = pytest.mark.db

REPO = Path(__file__).resolve().parents[2]
SERVER = "localhost"
HARM_SKILLS = ["handing-over", "i-dont-know", "no-promises", "privacy"]


def shipped() -> Registry:
    result = compile_content(REPO / "content", kinds=KINDS, server_name=SERVER, fetch_spec=None)
    assert isinstance(result, Registry), result
    return result


async def rows(db: TestStore, query: str, *args: object) -> list[dict[str, object]]:
    return [dict(r) for r in await db.tests.fetch(query, *args)]


async def test_the_shipped_content_is_projected_into_every_table(db: TestStore) -> None:
    registry = shipped()
    assert await publish(db, registry) == ["echo", "helper", "replier", "support"]
    bots = await rows(db, "published_bots")
    assert [b["slug"] for b in bots] == ["echo", "helper", "replier", "support"]
    helper = next(b for b in bots if b["slug"] == "helper")
    assert helper["puppet"] == "@bot_helper:localhost"
    compiled = helper["compiled"]
    assert isinstance(compiled, dict)
    assert compiled["skills"] == "all" and compiled["limits"]["steps"] == 8 and "file" not in compiled
    assert compiled["endings"]["out_of_money"].startswith("I have used up what I may spend")  # the site's words
    assert [s["name"] for s in await rows(db, "published_skills")] == sorted([*HARM_SKILLS, "matrix-help"])
    assert await rows(db, "published_tools") == []
    commands = await rows(db, "published_commands")
    assert [(c["name"], c["bot"], c["tool"], c["surfaces"]) for c in commands] == [
        ("summarise", "helper", None, ["rooms"]), ("triage", "helper", None, ["rooms"])]
    shape = commands[0]["shape"]
    assert isinstance(shape, dict) and set(shape) == {"name", "hint", "args"}  # the prompt is not the client's
    assert "{since}" in str(commands[0]["prompt"])
    assert [r["skill"] for r in await rows(db, "bot_skill_names", "helper")] == sorted([*HARM_SKILLS, "matrix-help"])
    assert await rows(db, "bot_skill_names", "echo") == []
    assert "desk" not in [b["slug"] for b in bots]


async def test_publishing_again_withdraws_what_is_gone_and_relinks(db: TestStore, tmp_path: Path) -> None:
    await publish(db, shipped())
    content = tmp_path / "content"
    shutil.copytree(REPO / "content", content)
    (content / "skills" / "matrix-help.md").unlink()
    (content / "commands" / "summarise.md").unlink()
    (content / "commands" / "triage.md").unlink()
    (content / "bots" / "echo.md").unlink()
    (content / "bots" / "support.md").unlink()
    (content / "bots" / "replier.md").unlink()
    (content / "bots" / "helper.md").write_text(
        "---\nname: Helper\ntools: [search_site]\nskills: [privacy]\n---\nHelp.\n", encoding="utf-8"
    )
    changed = compile_content(content, kinds=KINDS, server_name=SERVER, fetch_spec=None)
    assert isinstance(changed, Registry), changed
    assert await publish(db, changed) == ["helper"]
    assert [b["slug"] for b in await rows(db, "published_bots")] == ["helper"]
    assert [s["name"] for s in await rows(db, "published_skills")] == HARM_SKILLS
    assert await rows(db, "published_commands") == []
    assert [r["skill"] for r in await rows(db, "bot_skill_names", "helper")] == ["privacy"]
    assert [r["tool"] for r in await rows(db, "bot_tool_names", "helper")] == ["search_site"]
    # Withdrawn, not deleted: runs keep their bot.
    async with db.pool.acquire() as conn:
        assert await conn.fetchval("SELECT withdrawn_at IS NOT NULL FROM bots WHERE slug = 'echo'") is True


async def test_a_publish_that_fails_publishes_nothing(db: TestStore) -> None:
    first = shipped()
    await publish(db, first)
    before = [await rows(db, q) for q in ("published_bots", "published_skills", "published_commands")]

    sources = read_content(REPO / "content")
    sources["bots/helper.md"] = sources["bots/helper.md"].replace("name: Helper", "name: Renamed")
    second = compile_sources(sources, kinds=KINDS, server_name=SERVER, kit=read_kit())
    assert isinstance(second, Registry)

    class Broken(Queries):
        def __getitem__(self, name: str) -> str:
            if name == "upsert_command":  # fails after bots and skills were written
                return "SELECT no_such_column FROM commands"
            return super().__getitem__(name)

    broken = TestStore(db.pool, Broken(), db.dsn)  # the same database, its statements one broken
    with pytest.raises(Exception, match="no_such_column"):
        await publish(broken, second)
    after = [await rows(db, q) for q in ("published_bots", "published_skills", "published_commands")]
    assert after == before
    assert [b["name"] for b in after[0]] == ["Echo", "Helper", "Replier", "Support"]


async def test_a_file_that_does_not_compile_never_reaches_publish(db: TestStore, tmp_path: Path) -> None:
    content = tmp_path / "content"
    shutil.copytree(REPO / "content", content)
    (content / "bots" / "helper.md").write_text("---\nname: Helper\ntools: [lookup]\n---\nx\n", encoding="utf-8")
    result = compile_content(content, kinds=KINDS, server_name=SERVER, fetch_spec=None)
    assert isinstance(result, list) and "tools: 'lookup' is not a tool" in str(result[0])
    assert await rows(db, "published_bots") == []
