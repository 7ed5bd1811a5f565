"""The site's speech endpoints (SPEC §12): an OpenAI-shaped ``/v1/audio/transcriptions`` that hears a voice note
and an OpenAI-shaped ``/v1/audio/speech`` that says an answer. Adapters: all I/O, foreign errors translated here
into ``SpeechFailed``.

Their ``SpeechSettings`` are handed in from the root (``appservice.config.speech_from_env`` reads
``SUMMON_STT_*`` and ``SUMMON_TTS_*``); the engine reads no environment.

A deployment that names neither hears voice notes as not transcribed and answers in text: no endpoint is the
designed path, not a rescue. Like a model call, nothing is bought unless buying is switched on (AGENTS_LIVE=1).

A speech endpoint that STOPS working falls back to text on the first failure and stays fallen for the cool-off
(``fallen_seconds``), logged once: retrying a dead endpoint costs a round trip per answer to learn the same thing,
and an answer said in text beats one that is not said at all.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from engine.clock import Clock
from engine.errors import SpeechFailed

log = logging.getLogger(__name__)

# What a call costs when the site does not say (OpenAI's list prices for whisper-1 and tts-1).
STT_USD_PER_MINUTE = 0.006
TTS_USD_PER_MILLION_CHARS = 15.0


def endpoint(url: str, path: str) -> str:
    """The base or the path outright: both are ordinary things to paste."""
    url = url.strip().rstrip("/")
    return url if url.endswith(path) else url + path


@dataclass(frozen=True)
class SpeechSettings:
    stt_url: str | None = None
    stt_key: str | None = None
    stt_model: str = "whisper-1"
    tts_url: str | None = None
    tts_key: str | None = None
    tts_model: str = "tts-1"
    tts_voice: str = "alloy"
    live: bool = False  # buying switched on (AGENTS_LIVE=1): only then is an endpoint called
    stt_usd_per_minute: float = STT_USD_PER_MINUTE
    tts_usd_per_million_chars: float = TTS_USD_PER_MILLION_CHARS

    @property
    def hears(self) -> bool:
        return self.live and self.stt_url is not None

    @property
    def speaks(self) -> bool:
        return self.live and self.tts_url is not None


@dataclass(frozen=True)
class Heard:
    text: str
    cost_usd: float
    seconds: float  # what it was paid for: the endpoint's own word when it gives one (``usage``, ``duration``)


def _heard_seconds(answer: Mapping[str, object]) -> float | None:
    """How long the endpoint says it heard, where it says (``usage: {type: duration, seconds}`` as OpenAI's newer
    models answer, or ``duration`` as a verbose answer has it); None when it does not."""
    usage = answer.get("usage")
    said = usage.get("seconds") if isinstance(usage, Mapping) and usage.get("type") == "duration" else None
    if said is None:
        said = answer.get("duration")
    if isinstance(said, int | float) and not isinstance(said, bool) and 0 <= said < 1e7:
        return float(said)
    return None


@dataclass(frozen=True)
class Spoken:
    audio: bytes
    mimetype: str
    cost_usd: float


class Speech:
    """Both endpoints, with the speaker's fallen state (one per process)."""

    def __init__(self, settings: SpeechSettings, clock: Clock, *, timeout_seconds: float = 30.0,
                 fallen_seconds: float = 600.0, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.settings = settings
        self.clock = clock
        self.timeout_seconds = timeout_seconds
        self.fallen_seconds = fallen_seconds
        self._transport = transport
        self._fallen_at: float | None = None

    def _client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=self.timeout_seconds, transport=self._transport)

    def transcription_usd(self, seconds: float) -> float:
        """What hearing ``seconds`` of audio costs at the site's price."""
        return round(max(0.0, seconds) / 60.0 * self.settings.stt_usd_per_minute, 6)

    async def transcribe(self, audio: bytes, *, filename: str, mimetype: str, seconds: float | None) -> Heard:
        """The words in ``audio`` (``seconds`` long: what the call costs, unless the endpoint says how long it
        heard). Raises ``SpeechFailed`` when the endpoint does not give them, its ``why`` saying what was paid:
        ``unreached`` (nothing was sent), ``endpoint`` (it answered with an error: nothing billed), ``unknown``
        (it was sent and no answer came back, or a success that is not one: it may have been billed)."""
        s = self.settings
        if s.stt_url is None or not s.live:
            raise SpeechFailed("no transcription endpoint is switched on", why="unreached")
        headers = {"Authorization": f"Bearer {s.stt_key}"} if s.stt_key else {}
        try:
            async with self._client() as client:
                response = await client.post(endpoint(s.stt_url, "/audio/transcriptions"), headers=headers,
                                             data={"model": s.stt_model, "response_format": "json"},
                                             files={"file": (filename, audio, mimetype)})
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol) as exc:
            raise SpeechFailed(f"the transcription endpoint could not be reached ({type(exc).__name__}: {exc})",
                               why="unreached") from exc
        except httpx.HTTPError as exc:
            raise SpeechFailed(f"the transcription endpoint did not answer ({type(exc).__name__}: {exc})",
                               why="unknown") from exc
        if response.status_code != 200:
            raise SpeechFailed(f"the transcription endpoint answered {response.status_code}: {response.text[:200]}")
        try:
            answer = response.json()
        except ValueError as exc:
            raise SpeechFailed("the transcription endpoint's answer is not JSON", why="unknown") from exc
        text = answer.get("text") if isinstance(answer, dict) else None
        if not isinstance(text, str):
            raise SpeechFailed("the transcription endpoint's answer has no text", why="unknown")
        heard = _heard_seconds(answer)
        took = heard if heard is not None else (seconds or 0.0)
        return Heard(text.strip(), self.transcription_usd(took), took)

    # --- speaking ---------------------------------------------------------------------------------------

    @property
    def fallen(self) -> bool:
        """Whether speech has failed within the cool-off: answers go out as text only meanwhile."""
        if self._fallen_at is None:
            return False
        if self.clock.monotonic() - self._fallen_at >= self.fallen_seconds:
            self._fallen_at = None
            log.info("the speech endpoint's cool-off is over; answers are spoken again")
            return False
        return True

    def may_speak(self) -> bool:
        return self.settings.speaks and not self.fallen

    async def speak(self, text: str, *, voice: str | None) -> Spoken | None:
        """``text`` said by the endpoint (ogg/opus, what a voice message is), or None: no endpoint, fallen, or
        it failed now (then it is fallen for the cool-off, said once in the log)."""
        if not self.may_speak():
            return None
        s = self.settings
        assert s.tts_url is not None
        headers = {"Authorization": f"Bearer {s.tts_key}"} if s.tts_key else {}
        body = {"model": s.tts_model, "voice": voice or s.tts_voice, "input": text, "response_format": "opus"}
        try:
            async with self._client() as client:
                response = await client.post(endpoint(s.tts_url, "/audio/speech"), headers=headers, json=body)
            if response.status_code != 200 or not response.content:
                raise SpeechFailed(f"the speech endpoint answered {response.status_code}: {response.text[:200]}")
        except (httpx.HTTPError, SpeechFailed) as exc:
            self._fallen_at = self.clock.monotonic()
            log.error("the speech endpoint failed (%s); answers go out as text only for %.0f s", exc,
                      self.fallen_seconds)
            return None
        mimetype = response.headers.get("content-type", "audio/ogg").split(";")[0].strip() or "audio/ogg"
        return Spoken(response.content, mimetype,
                      round(len(text) / 1_000_000 * s.tts_usd_per_million_chars, 6))
