"""The figures of issue 24, item 3, measured on the real Synapse with the fake speech server: bytes a refused
sender sends to the paid endpoint, transcriptions per event, what is recorded. A measurement, not a test: it is not
collected by `make test` (its name is not test_*.py) and asserts nothing, so it runs on main's code as it does on
this branch's. Run it by name (with your ports exported):

    .venv/bin/pytest -q -s tests/matrix/voice_figures.py
"""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from appservice.app import Service
from appservice.matrix.inbound.followups import Transcribe
from tests.matrix.test_voice_live import voice_note
from tests.speech.fake_speech import FakeSpeech, tone_wav
from tests.support import eventually

pytestmark = pytest.mark.matrix
BIG = b"ID3\x04\x00\x00\x00\x00\x00\x00" + b"\xff\xfb\x90\x00" * (19 * 1024 * 1024 // 4 + 25_000)  # ~19.1 MiB


async def recorded(sql: asyncpg.Pool, events: list[str]) -> tuple[int, float]:
    n, usd = await sql.fetchrow("SELECT count(*), coalesce(sum(c.cost_usd), 0)::float8 FROM speech_calls c JOIN "
                                "agent_runs r ON r.id = c.run_id WHERE c.kind = 'transcription' AND "
                                "r.trigger_event = ANY($1)", events)
    try:
        m, more = await sql.fetchrow("SELECT count(*), coalesce(sum(cost_usd), 0)::float8 FROM speech_calls WHERE "
                                     "run_id IS NULL AND event_id = ANY($1)", events)
    except asyncpg.UndefinedColumnError:
        m, more = 0, 0.0
    return n + m, usd + more


async def test_figures(people: Any, service: Service, sql: asyncpg.Pool, fake_speech: FakeSpeech,
                       content_dir: Path) -> None:
    out = []
    # 1. Ten 19 MiB notes from a sender the bot refuses (for: admits nobody of theirs).
    path = content_dir / "bots" / "echo.md"
    original = path.read_text()
    before = service.registry().get("echo")
    path.write_text(original.replace("for: member", "for: user:@nobody:localhost"))
    await eventually(lambda: service.registry().get("echo") != before, timeout=10)
    try:
        mallory = await people("mallory")
        room = await mallory.room_with("echo")
        sent, arrived = fake_speech.bytes_heard, fake_speech.arrived
        events = []
        for _ in range(10):
            events.append(await voice_note(mallory, room, BIG, mimetype="audio/mpeg", duration_ms=2000))
        await asyncio.sleep(15)
        told = len([e for e in events if await mallory.answers_to(room, e)])
        n, usd = await recorded(sql, events)
        out.append(f"refused sender, 10 notes of {len(BIG) / 2**20:.1f} MiB: {(fake_speech.bytes_heard - sent) / 2**20:.1f} "
                   f"MiB sent to the paid endpoint in {fake_speech.arrived - arrived} calls; {n} calls recorded "
                   f"({usd:.6f} USD); {told} of 10 told in words")
    finally:
        path.write_text(original)
        await eventually(lambda: service.registry().get("echo") == before, timeout=10)
    # 2. A note heard, then its hearing carried out again five times (rooms retries an action up to six times).
    alice = await people("alice")
    room = await alice.room_with("echo")
    arrived = fake_speech.arrived
    asked = await voice_note(alice, room, tone_wav(2.0), script=[{"text": "heard"}])
    await alice.answer_to(room, asked, timeout=30)
    for _ in range(5):
        await service.rooms.carry_out(Transcribe(room_id=room, event_id=asked, bot="echo"))
    n, usd = await recorded(sql, [asked])
    out.append(f"one note, its hearing carried out 6 times: {fake_speech.arrived - arrived} transcriptions; "
               f"{n} recorded ({usd:.6f} USD)")
    # 3. An allowed sender's 19 MiB note that claims 2 s (nothing here can measure it).
    bob = await people("bob")
    room = await bob.room_with("echo")
    sent, arrived = fake_speech.bytes_heard, fake_speech.arrived
    asked = await voice_note(bob, room, BIG, mimetype="audio/mpeg", duration_ms=2000, script=[{"text": "heard"}])
    answer = await bob.answer_to(room, asked, timeout=60)
    n, usd = await recorded(sql, [asked])
    out.append(f"allowed sender, {len(BIG) / 2**20:.1f} MiB claiming 2 s: {(fake_speech.bytes_heard - sent) / 2**20:.1f} MiB "
               f"sent in {fake_speech.arrived - arrived} calls, {n} recorded ({usd:.6f} USD); told: "
               f"{answer['content']['body'][:60]!r}")
    # 4. Over the ceiling after the hearing (0.20 an hour, 0.195 spent): heard, then refused.
    carol = await people("carol")
    room = await carol.room_with("echo")
    await sql.execute("INSERT INTO spenders (who) VALUES ($1) ON CONFLICT DO NOTHING", carol.user_id)
    await sql.execute("INSERT INTO spend_ledger (who, bot, usd, spent, reserved) VALUES ($1, 'echo', 0.195, 0.195, false)",
                      carol.user_id)
    sent, arrived = fake_speech.bytes_heard, fake_speech.arrived
    asked = await voice_note(carol, room, tone_wav(2.0), script=[{"text": "heard"}])
    answer = await carol.answer_to(room, asked, timeout=30)
    n, usd = await recorded(sql, [asked])
    out.append(f"sender over their ceiling: {(fake_speech.bytes_heard - sent) / 1024:.0f} KiB sent in "
               f"{fake_speech.arrived - arrived} calls, {n} recorded ({usd:.6f} USD); told {answer['content']['body'][:50]!r}")
    # 5. A retry while the note's call is still out (another attempt, another process): does it pay again?
    dave = await people("dave")
    room = await dave.room_with("echo")
    arrived = fake_speech.arrived
    stall = fake_speech.stall = asyncio.Event()
    try:
        asked = await voice_note(dave, room, tone_wav(2.0), script=[{"text": "heard"}])
        await eventually(lambda: fake_speech.arrived == arrived + 1, timeout=30)
        try:
            await asyncio.wait_for(service.rooms.carry_out(Transcribe(room_id=room, event_id=asked, bot="echo")), 5)
        except TimeoutError:
            pass
        during = fake_speech.arrived - arrived
    finally:
        stall.set()
        fake_speech.stall = None
    await dave.answer_to(room, asked, timeout=30)
    n, usd = await recorded(sql, [asked])
    out.append(f"a retry while its call is out: {during} transcriptions; {n} recorded ({usd:.6f} USD)")
    # 6. The endpoint answers 503 (nothing billed) for an allowed sender's note.
    erin = await people("erin")
    room = await erin.room_with("echo")
    fake_speech.answer, fake_speech.status = {"error": {"message": "down"}}, 503
    try:
        asked = await voice_note(erin, room, tone_wav(2.0), script=[{"text": "heard"}])
        answer = await erin.answer_to(room, asked, timeout=30)
    finally:
        fake_speech.answer, fake_speech.status = None, 200
    n, usd = await recorded(sql, [asked])
    out.append(f"a call the endpoint refused: {n} recorded ({usd:.6f} USD); told {answer['content']['body'][:40]!r}")
    print("\nFIGURES\n" + "\n".join(out))
