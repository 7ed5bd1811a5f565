"""Voice notes on the real Synapse (SPEC §12): a voice message (a WAV made here) uploaded by a person summons the
bot whose DM it is said in; the service fetches it through authenticated media, hears it through the fake
transcription endpoint, stores the transcript as the line's words and asks the bot with them. A ``voice:`` bot
answers a voice note with text and a voice message (said by the fake speech endpoint); a failing endpoint leaves
text only and stays fallen. Bad input is answered in words."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from nio import UploadResponse

from appservice.app import Service
from appservice.dev import SCRIPT_KEY
from tests.matrix.people import Person
from tests.speech.fake_speech import FakeSpeech, tone_wav
from tests.support import eventually

pytestmark = pytest.mark.matrix


async def upload(person: Person, data: bytes, mimetype: str = "audio/wav") -> str:
    resp, _ = await person.client.upload(lambda *_: data, content_type=mimetype, filename="voice.wav",
                                         filesize=len(data))
    assert isinstance(resp, UploadResponse), resp
    return str(resp.content_uri)


async def voice_note(person: Person, room: str, data: bytes, *, mimetype: str = "audio/wav",
                     size: int | None = None, url: str | None = None, script: list[dict[str, Any]] | None = None,
                     duration_ms: int = 2000) -> str:
    mxc = url or await upload(person, data, mimetype)
    content: dict[str, Any] = {
        "msgtype": "m.audio", "body": "Voice message", "url": mxc,
        "info": {"mimetype": mimetype, "size": len(data) if size is None else size, "duration": duration_ms},
        "org.matrix.msc1767.audio": {"duration": duration_ms, "waveform": [0, 512, 1024, 512]},
        "org.matrix.msc3245.voice": {},
    }
    if script is not None:
        content[SCRIPT_KEY] = script
    return await person.send(room, content)


async def test_a_voice_note_in_a_dm_is_heard_and_answered(people: Any, service: Service, sql: asyncpg.Pool,
                                                          fake_speech: FakeSpeech) -> None:
    alice = await people("alice")
    room = await alice.room_with("echo")
    wav = tone_wav(2.0)
    before = len(fake_speech.heard)
    asked = await voice_note(alice, room, wav, script=[{"text": "Tomorrow in Lyon: rain."}])
    answer = await alice.answer_to(room, asked, timeout=30)
    assert answer["sender"] == alice.puppet("echo")
    assert answer["content"]["body"] == "Tomorrow in Lyon: rain."
    heard = fake_speech.heard[before]
    assert heard.audio == wav and heard.authorization == "Bearer stt-key"  # fetched whole, through the media API
    said = await sql.fetchval("SELECT said FROM room_events WHERE event_id = $1", asked)
    assert said == fake_speech.transcript  # stored: every context shows the words
    run = await sql.fetchrow("SELECT id, prompt FROM agent_runs WHERE trigger_event = $1", asked)
    assert run["prompt"] == fake_speech.transcript
    call = await sql.fetchrow("SELECT kind, units, cost_usd FROM speech_calls WHERE run_id = $1", run["id"])
    assert call["kind"] == "transcription" and float(call["units"]) == pytest.approx(2.0, abs=0.01)
    assert float(call["cost_usd"]) == pytest.approx(2 / 60 * 0.006, abs=1e-6)
    # Settled (issue 19's ledger: usd and spent alike) to what the run cost, its hearing included.
    steps = await sql.fetchval("SELECT coalesce(sum(cost_usd), 0)::float8 FROM agent_steps WHERE run_id = $1",
                               run["id"])
    ledger = await sql.fetchrow("SELECT usd::float8 AS usd, spent::float8 AS spent, drawn::float8 AS drawn, reserved "
                                "FROM spend_ledger WHERE run_id = $1", run["id"])
    assert ledger is not None and not ledger["reserved"] and ledger["drawn"] == 0
    assert ledger["usd"] == ledger["spent"] == pytest.approx(steps + float(call["cost_usd"]), abs=1e-6)


async def test_a_voice_note_in_a_shared_room_that_names_no_bot_is_not_heard(
        people: Any, service: Service, sql: asyncpg.Pool, fake_speech: FakeSpeech) -> None:
    alice, bob = await people("alice"), await people("bob")
    room = await alice.room_with("echo")
    await alice.client.room_invite(room, bob.user_id)
    await bob.client.join(room)
    await alice.wait_membership(room, bob.user_id, "join")
    before = len(fake_speech.heard)
    asked = await voice_note(alice, room, tone_wav(0.5))
    fence = await alice.say(room, "Echo, fence", mention="echo", script=[{"text": "fence"}])
    await alice.answer_to(room, fence)
    assert len(fake_speech.heard) == before
    assert await alice.answers_to(room, asked) == []
    # What the bot was given for the next line reads the voice note as the site's words for one not transcribed.
    context = await sql.fetchval("SELECT context FROM agent_runs WHERE trigger_event = $1", fence)
    said = [line["said"] for line in context["lines"] if line.get("event_id") == asked]
    assert said == ["(a voice message that was not transcribed)"]


@pytest.mark.parametrize(("how", "words"), [
    ("too_large", "too large"), ("too_long", "too long"), ("not_audio", "not audio"),
    ("download", "could not listen to that voice message"),
])
async def test_bad_voice_notes_are_answered_in_words(people: Any, service: Service, fake_speech: FakeSpeech,
                                                     how: str, words: str) -> None:
    alice = await people("alice")
    room = await alice.room_with("echo")
    before = len(fake_speech.heard)
    if how == "too_large":
        asked = await voice_note(alice, room, tone_wav(0.2), size=21 * 1024 * 1024)
    elif how == "too_long":
        asked = await voice_note(alice, room, tone_wav(0.2), duration_ms=11 * 60 * 1000)
    elif how == "not_audio":
        asked = await voice_note(alice, room, b"%PDF-1.7 this is not audio at all " * 20, mimetype="audio/ogg")
    else:
        asked = await voice_note(alice, room, tone_wav(0.2), url=f"mxc://localhost/{uuid.uuid4().hex}")
    answer = await alice.answer_to(room, asked, timeout=30)
    assert words in answer["content"]["body"]
    assert len(fake_speech.heard) == before  # nothing was sent to be transcribed


async def test_a_voice_bot_answers_a_voice_note_aloud_and_in_text_and_a_failing_endpoint_stays_fallen(
        people: Any, service: Service, content_dir: Path, fake_speech: FakeSpeech, sql: asyncpg.Pool) -> None:
    path = content_dir / "bots" / "echo.md"
    original = path.read_text()
    try:
        path.write_text(original.replace("name: Echo", "name: Echo\nsurfaces: [rooms, voice]\nvoice: {voice: nova}"))
        await eventually(lambda: service.registry().get("echo").voice is not None, timeout=5)  # type: ignore[union-attr]
        alice = await people("alice")
        room = await alice.room_with("echo")
        puppet = alice.puppet("echo")

        async def voiced_after(event_id: str) -> list[dict[str, Any]]:
            return [e for e in await alice.events(room) if e["sender"] == puppet
                    and e["content"].get("msgtype") == "m.audio"
                    and (e["content"].get("m.relates_to") or {}).get("m.in_reply_to", {}).get("event_id") == event_id]

        asked = await voice_note(alice, room, tone_wav(1.0), script=[{"text": "It will rain."}])
        text = await alice.answer_to(room, asked, timeout=30)
        assert text["content"]["body"] == "It will rain."
        spoken = (await eventually(lambda: voiced_after(asked), timeout=20))[0]["content"]
        assert "org.matrix.msc3245.voice" in spoken and spoken["url"].startswith("mxc://")
        assert spoken["info"]["duration"] == 750 and spoken["org.matrix.msc1767.audio"]["duration"] == 750
        waveform = spoken["org.matrix.msc1767.audio"]["waveform"]
        assert len(waveform) == 64 and max(waveform) == 1024
        assert fake_speech.said[-1]["input"] == "It will rain." and fake_speech.said[-1]["voice"] == "nova"
        run_id = await sql.fetchval("SELECT id FROM agent_runs WHERE trigger_event = $1", asked)
        assert await sql.fetchval("SELECT count(*) FROM speech_calls WHERE run_id = $1 AND kind = 'speech'", run_id) == 1

        # The endpoint fails: text only. It comes back, but stays fallen for the cool-off: still text only, and
        # it is not even asked.
        fake_speech.failing = True
        asked = await voice_note(alice, room, tone_wav(0.5), script=[{"text": "Sunny later."}])
        assert (await alice.answer_to(room, asked, timeout=30))["content"]["body"] == "Sunny later."
        await eventually(lambda: fake_speech.said[-1]["input"] == "Sunny later.", timeout=20)
        fake_speech.failing = False
        calls = len(fake_speech.said)
        asked_again = await voice_note(alice, room, tone_wav(0.5), script=[{"text": "Windy too."}])
        assert (await alice.answer_to(room, asked_again, timeout=30))["content"]["body"] == "Windy too."
        fence = await alice.say(room, "Echo, fence", mention="echo", script=[{"text": "fence"}])
        await alice.answer_to(room, fence)
        assert len(fake_speech.said) == calls
        assert await voiced_after(asked) == [] and await voiced_after(asked_again) == []
    finally:
        service.speech.fallen_seconds = 0  # the cool-off over, for whoever comes next
        path.write_text(original)
        await eventually(lambda: service.registry().get("echo").voice is None, timeout=5)  # type: ignore[union-attr]
