"""Charters sealed at rest (SPEC §10), on the real PostgreSQL: the raw row says nothing of the bot, keys
rotate, a corrupt row fails closed for that charter alone, and who may overwrite or remove what."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from appservice.members.book import Book
from appservice.members.charter import read_charter
from appservice.members.errors import CharterRefused, CharterUnreadable
from appservice.members.seal import Keyring, new_key
from tests.store import TestStore

pytestmark = pytest.mark.db
REPO = Path(__file__).resolve().parents[2]

ALICE = "@alice:localhost"
BOB = "@bob:localhost"
K1 = f"k1:{new_key()}"
K2 = f"k2:{new_key()}"


def charter(owner: str = ALICE, **over: Any) -> Any:
    data: dict[str, Any] = {
        "name": "Morning News", "glyph": "📰", "schedule": {"at": "08:00", "tz": "Europe/Dublin"},
        "prompt": "Fetch today's headlines from RTÉ and write a short digest for Alice.",
        "allow": ["https://www.rte.ie/feeds/rss/"], "sources": ["rte.ie"], "owner": owner, "author": owner,
    }
    data.update(over)
    return read_charter(data)


async def host(db: TestStore) -> str:
    """The bot that hosts member bots, as publishing it would leave it (its clocks hang off its row)."""
    await db.pool.execute("INSERT INTO bots (slug, name, puppet, surfaces, compiled) VALUES ('builder', 'Builder', "
                          "'@bot_builder:localhost', '{matrix}', '{}') ON CONFLICT DO NOTHING")
    return "builder"


async def made(db: TestStore, book: Book, owner: str = ALICE, **over: Any) -> str:
    now = await db.schedules.now()
    slug = await host(db)
    async with db.transaction("test_make") as tx:
        return await book.create(tx, charter(owner, **over), by=owner, clock_at=now, host=slug)


async def test_the_raw_row_holds_no_name_prompt_source_or_schedule(db: TestStore) -> None:
    book = Book(Keyring.parse([K1]))
    charter_id = await made(db, book)
    row = dict(await db.pool.fetchrow("SELECT * FROM member_bots WHERE id = $1", charter_id))
    assert set(row) == {"id", "author", "owner", "key_id", "sealed", "size", "failures", "created_at", "updated_at"}
    raw = repr(row).encode() + bytes(row["sealed"])
    for secret in (b"Morning", b"News", b"headlines", b"rte", b"RT\xc3\x89", b"08:00", b"Dublin", b"Europe"):
        assert secret not in raw, secret
    assert row["key_id"] == "k1" and row["owner"] == ALICE and row["author"] == ALICE
    assert row["size"] == len(charter().sealable())
    kept = await book.read(db, charter_id)
    assert kept is not None and kept.charter.name == "Morning News"
    # Its clock exists with it: no charter without a clock.
    assert await db.pool.fetchval("SELECT count(*) FROM bot_clock WHERE bot = 'builder' AND trigger = $1",
                                  f"member:{charter_id}") == 1


async def test_a_charter_for_somebody_else_is_refused_and_nothing_is_stored(db: TestStore) -> None:
    book = Book(Keyring.parse([K1]))
    now = await db.schedules.now()
    with pytest.raises(CharterRefused, match="somebody else"):
        async with db.transaction("test_make") as tx:
            await book.create(tx, charter(BOB), by=ALICE, clock_at=now, host=await host(db))
    assert await db.pool.fetchval("SELECT count(*) FROM member_bots") == 0


async def test_rotation_reseals_every_row_under_the_new_key(db: TestStore) -> None:
    old = Book(Keyring.parse([K1]))
    ids = [await made(db, old), await made(db, old, BOB)]
    rotated = Book(Keyring.parse([K2, K1]))
    assert await rotated.rotate(db) == (2, [])
    keys = {r["id"]: r["key_id"] for r in await db.pool.fetch("SELECT id, key_id FROM member_bots")}
    assert keys == dict.fromkeys(ids, "k2")
    # The old key can go: the new one alone opens them all.
    only_new = Book(Keyring.parse([K2]))
    for charter_id in ids:
        kept = await only_new.read(db, charter_id)
        assert kept is not None and kept.charter.prompt.startswith("Fetch today's")
    assert await rotated.rotate(db) == (0, [])


async def test_summon_keys_rotate_reseals_from_the_command_line(db: TestStore, tmp_path: Path) -> None:
    charter_id = await made(db, Book(Keyring.parse([K1])))
    config = tmp_path / "summon.yaml"
    config.write_text(yaml.safe_dump({
        "homeserver": {"url": "http://127.0.0.1:1", "server_name": "localhost"},
        "appservice": {"address": "http://127.0.0.1:2", "as_token": "a" * 20, "hs_token": "h" * 20},
        "database": {"dsn": db.dsn}, "members": {"keys": [K1]},
    }))
    env = {**os.environ, "SUMMON_MEMBER_KEYS": f"{K2},{K1}"}  # the environment wins over the file
    done = subprocess.run([sys.executable, "-m", "appservice", "-c", str(config), "keys", "rotate"], cwd=REPO,
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert "re-sealed 1 charter(s) under key k2" in done.stdout
    assert await db.pool.fetchval("SELECT key_id FROM member_bots WHERE id = $1", charter_id) == "k2"


async def test_a_corrupt_row_fails_closed_for_that_charter_only(db: TestStore) -> None:
    book = Book(Keyring.parse([K1]))
    broken = await made(db, book)
    fine = await made(db, book, name="Evening News")
    sealed = bytearray(await db.pool.fetchval("SELECT sealed FROM member_bots WHERE id = $1", broken))
    sealed[-1] ^= 0x01
    await db.pool.execute("UPDATE member_bots SET sealed = $2 WHERE id = $1", broken, bytes(sealed))
    with pytest.raises(CharterUnreadable, match="corrupt or tampered"):
        await book.read(db, broken)
    assert [k.charter.name for k in await book.owned_by(db, ALICE)] == ["Evening News"]
    # A blob copied onto another row does not open there either (the id is sealed in).
    good = await db.pool.fetchval("SELECT sealed FROM member_bots WHERE id = $1", fine)
    await db.pool.execute("UPDATE member_bots SET sealed = $2 WHERE id = $1", broken, good)
    with pytest.raises(CharterUnreadable):
        await book.read(db, broken)
    # A key that is no longer configured: refused in words, never a crash.
    with pytest.raises(CharterUnreadable, match="not configured"):
        await Book(Keyring.parse([K2])).read(db, fine)
    # A rotation leaves the unreadable one as it is and says so.
    assert await Book(Keyring.parse([K2, K1])).rotate(db) == (1, [broken])


async def test_overwrite_is_author_or_owner_and_keeps_them(db: TestStore) -> None:
    book = Book(Keyring.parse([K1]))
    charter_id = await made(db, book)
    async with db.transaction("test") as tx:
        with pytest.raises(CharterRefused, match="not yours to change"):
            await book.overwrite(tx, charter_id, charter(BOB, name="Bob's now"), by=BOB)
    async with db.transaction("test") as tx:
        kept = await book.overwrite(tx, charter_id, charter(BOB, name="The Journal"), by=ALICE)
    assert kept.charter.owner == ALICE and kept.charter.name == "The Journal"
    again = await book.read(db, charter_id)
    assert again is not None and again.charter.name == "The Journal" and again.charter.owner == ALICE


async def test_remove_is_author_owner_or_admin_and_takes_the_clock(db: TestStore) -> None:
    book = Book(Keyring.parse([K1]))
    mine, other = await made(db, book), await made(db, book)
    async with db.transaction("test") as tx:
        with pytest.raises(CharterRefused, match="not yours to remove"):
            await book.remove(tx, mine, by=BOB)
    async with db.transaction("test") as tx:
        assert await book.remove(tx, mine, by=ALICE)
    async with db.transaction("test") as tx:
        assert await book.remove(tx, other, by="@admin:localhost", admin=True)
        assert not await book.remove(tx, other, by=ALICE)
    assert await db.pool.fetchval("SELECT count(*) FROM member_bots") == 0
    assert await db.pool.fetchval("SELECT count(*) FROM bot_clock WHERE trigger LIKE 'member:%'") == 0


def test_a_key_that_is_not_32_bytes_is_refused_in_one_line() -> None:
    short = base64.b64encode(b"x" * 16).decode()
    with pytest.raises(ValueError, match="16 bytes; a key is 32 random bytes"):
        Keyring.parse([f"k1:{short}"])
    with pytest.raises(ValueError, match="named twice"):
        Keyring.parse([K1, K1])
