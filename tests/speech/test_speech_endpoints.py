"""The speech endpoints' client against a fake OpenAI-shaped server on 127.0.0.1, and the audio a voice message
needs to know about (its length and its waveform), from bytes made here."""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import AsyncIterator

import pytest

from appservice.config import speech_from_env
from appservice.speech import audio
from appservice.speech.endpoints import Speech, SpeechSettings, endpoint
from engine.clock import FakeClock
from engine.errors import SpeechFailed
from tests.speech.fake_speech import FakeSpeech, tone_wav


@pytest.fixture
async def fake() -> AsyncIterator[FakeSpeech]:
    server = FakeSpeech()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def settings(fake: FakeSpeech, *, live: bool = True) -> SpeechSettings:
    return SpeechSettings(stt_url=fake.url, stt_key="k-stt", tts_url=fake.url + "/audio/speech", tts_key="k-tts",
                          tts_voice="nova", live=live)


def test_the_settings_come_from_the_environment_and_buying_must_be_on() -> None:
    env = {"SUMMON_STT_URL": "https://stt.example/v1", "SUMMON_TTS_URL": "https://tts.example/v1/audio/speech",
           "SUMMON_TTS_VOICE": "nova"}
    off = speech_from_env(env)
    assert (off.hears, off.speaks) == (False, False)  # named, but buying is not switched on
    on = speech_from_env({**env, "AGENTS_LIVE": "1"})
    assert (on.hears, on.speaks, on.tts_voice, on.stt_model) == (True, True, "nova", "whisper-1")
    assert endpoint("https://stt.example/v1/", "/audio/transcriptions") == "https://stt.example/v1/audio/transcriptions"
    assert endpoint(on.tts_url or "", "/audio/speech") == "https://tts.example/v1/audio/speech"


async def test_a_voice_note_is_transcribed_and_costed(fake: FakeSpeech) -> None:
    speech = Speech(settings(fake), FakeClock())
    wav = tone_wav(2.0)
    heard = await speech.transcribe(wav, filename="voice.wav", mimetype="audio/wav", seconds=120.0)
    assert heard.text == fake.transcript
    assert heard.cost_usd == pytest.approx(0.012)  # two minutes at 0.006 USD a minute
    assert fake.heard[0].audio == wav and fake.heard[0].model == "whisper-1"
    assert fake.heard[0].authorization == "Bearer k-stt"


async def test_nothing_is_called_unless_buying_is_on(fake: FakeSpeech) -> None:
    speech = Speech(settings(fake, live=False), FakeClock())
    with pytest.raises(SpeechFailed):
        await speech.transcribe(tone_wav(), filename="v.wav", mimetype="audio/wav", seconds=1)
    assert await speech.speak("hello", voice=None) is None
    assert (fake.heard, fake.said) == ([], [])


async def test_a_failing_speech_endpoint_falls_back_and_stays_fallen_for_the_cool_off(
        fake: FakeSpeech, caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    speech = Speech(settings(fake), clock, fallen_seconds=300)
    spoken = await speech.speak("It will rain.", voice="nova")
    assert spoken is not None and audio.sniff(spoken.audio) and spoken.cost_usd > 0
    assert fake.said[-1] == {"model": "tts-1", "voice": "nova", "input": "It will rain.", "response_format": "opus"}
    fake.failing = True
    with caplog.at_level(logging.ERROR, logger="appservice.speech.endpoints"):
        assert await speech.speak("And tomorrow?", voice="nova") is None
        fake.failing = False  # it is back, but nobody asks it: fallen is fallen until the cool-off is over
        for _ in range(3):
            clock.advance(60)
            assert await speech.speak("Still there?", voice="nova") is None
    assert len(fake.said) == 2
    assert len([r for r in caplog.records if "speech endpoint failed" in r.getMessage()]) == 1  # logged once
    clock.advance(120)  # 300 s after the failure
    assert await speech.speak("Back again.", voice="nova") is not None
    assert len(fake.said) == 3


def test_a_wav_says_how_long_it_plays_and_draws_its_waveform() -> None:
    wav = tone_wav(1.5)
    assert audio.sniff(wav) and not audio.sniff(b"%PDF-1.7 not audio") and not audio.sniff(b"RIFF\0\0\0\0AVI ")
    assert audio.seconds(wav) == pytest.approx(1.5)
    bars = audio.waveform(wav)
    assert len(bars) == audio.BARS and max(bars) == audio.TOP and all(0 <= b <= audio.TOP for b in bars)
    assert bars[0] < bars[len(bars) // 2] > bars[-1]  # it rises and falls, as the tone does


def test_an_ogg_opus_says_how_long_it_plays_from_its_granule_position() -> None:
    def page(granule: int, payload: bytes) -> bytes:
        return (b"OggS" + bytes([0, 0]) + struct.pack("<q", granule) + b"\0" * 12 + bytes([1, len(payload)])
                + payload)

    head = b"OpusHead" + bytes([1, 1]) + struct.pack("<H", 312) + b"\0" * 9
    ogg = page(0, head) + page(0, b"OpusTags") + page(48_000, b"x" * 40) + page(96_312, b"y" * 120)
    assert audio.sniff(ogg)
    assert audio.seconds(ogg) == pytest.approx(2.0)
    bars = audio.waveform(ogg, bars=2)
    assert bars == [round(40 / 120 * audio.TOP), audio.TOP]


async def test_a_transcription_is_paid_for_what_the_endpoint_says_it_heard(fake: FakeSpeech) -> None:
    speech = Speech(settings(fake), FakeClock())
    fake.answer = {"text": " hello ", "usage": {"type": "duration", "seconds": 3}}
    heard = await speech.transcribe(tone_wav(), filename="v.wav", mimetype="audio/wav", seconds=60.0)
    assert (heard.text, heard.seconds, heard.cost_usd) == ("hello", 3.0, pytest.approx(0.0003))
    fake.answer = {"text": "hello", "duration": 7.5}  # as a verbose answer says it
    heard = await speech.transcribe(tone_wav(), filename="v.wav", mimetype="audio/wav", seconds=60.0)
    assert heard.seconds == 7.5
    fake.answer = {"text": "hello", "usage": {"type": "tokens", "input_tokens": 10}, "duration": "long"}
    heard = await speech.transcribe(tone_wav(), filename="v.wav", mimetype="audio/wav", seconds=60.0)
    assert heard.seconds == 60.0  # it says nothing usable: the note's own bound


@pytest.mark.parametrize(("answer", "status", "why"), [
    ({"error": {"message": "bad key"}}, 401, "endpoint"),  # it answered no: nothing billed
    ({"error": {"message": "down"}}, 503, "endpoint"),
    (b"<html>a proxy's page</html>", 200, "unknown"),  # a success that is not one: it may have been billed
    ({"words": "no text field"}, 200, "unknown"),
    ([1, 2, 3], 200, "unknown"),
])
async def test_a_failed_transcription_says_what_was_paid(fake: FakeSpeech, answer: object, status: int,
                                                         why: str) -> None:
    fake.answer, fake.status = answer, status  # type: ignore[assignment]
    with pytest.raises(SpeechFailed) as failed:
        await Speech(settings(fake), FakeClock()).transcribe(tone_wav(), filename="v.wav", mimetype="audio/wav",
                                                             seconds=1.0)
    assert failed.value.why == why


async def test_an_endpoint_that_cannot_be_reached_was_sent_nothing(fake: FakeSpeech) -> None:
    await fake.stop()  # nothing listens on its port now
    with pytest.raises(SpeechFailed) as failed:
        await Speech(settings(fake), FakeClock()).transcribe(tone_wav(), filename="v.wav", mimetype="audio/wav",
                                                             seconds=1.0)
    assert failed.value.why == "unreached"


async def test_an_endpoint_that_does_not_answer_in_time_may_have_billed(fake: FakeSpeech) -> None:
    fake.stall = asyncio.Event()
    try:
        with pytest.raises(SpeechFailed) as failed:
            await Speech(settings(fake), FakeClock(), timeout_seconds=0.3).transcribe(
                tone_wav(), filename="v.wav", mimetype="audio/wav", seconds=1.0)
        assert failed.value.why == "unknown" and fake.arrived == 1
    finally:
        fake.stall.set()
