"""A local fake of the site's speech endpoints: an aiohttp server on 127.0.0.1 (a free port) speaking OpenAI's
``POST /v1/audio/transcriptions`` (multipart: ``file``, ``model``; answers ``{"text": …}``) and
``POST /v1/audio/speech`` (JSON: ``model``, ``voice``, ``input``; answers audio bytes), recording every call.
``failing`` makes every speech call a 502, as a provider having a bad hour does. ``stall`` (an event, while it is
not set) holds every transcription before it answers, as a slow provider does — and ``arrived`` / ``in_flight`` /
``most_in_flight`` count the transcriptions as they come in, so a test sees how many were sent and how many at once.
Audio is made here, in pure Python: a WAV of tones (``tone_wav``), an Ogg Opus stream (``opus_ogg``) whose packets
and granule positions may say different things."""

from __future__ import annotations

import asyncio
import math
import struct
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


def tone_wav(seconds: float = 1.0, rate: int = 16_000, hz: float = 220.0) -> bytes:
    """A mono 16-bit PCM WAV: a tone whose loudness rises and falls, like a syllable."""
    n = int(seconds * rate)
    samples = [int(12000 * math.sin(math.pi * i / n) * math.sin(2 * math.pi * hz * i / rate)) for i in range(n)]
    data = struct.pack(f"<{n}h", *samples)
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    return (b"RIFF" + struct.pack("<I", 4 + 8 + len(fmt) + 8 + len(data)) + b"WAVE"
            + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data)


def _ogg_page(serial: int, seq: int, granule: int, packets: list[bytes], flags: int = 0) -> bytes:
    """One Ogg page of whole packets (each under 255 bytes: one lacing value each). The CRC is left 0: nothing
    here checks it, and a decoder that does is not what these tests are about."""
    lacing = bytes(len(p) for p in packets)
    return (b"OggS" + bytes([0, flags]) + struct.pack("<qIII", granule, serial, seq, 0) + bytes([len(lacing)])
            + lacing + b"".join(packets))


def opus_ogg(seconds: float, *, packet: bytes = b"\x78" + b"\x55" * 60, packet_ms: float = 20.0,
             granule_seconds: float | None = None) -> bytes:
    """An Ogg Opus stream whose packets play ``seconds`` (each ``packet``, ``packet_ms`` long by its TOC byte; the
    default is a 20 ms hybrid frame), its granule positions saying ``granule_seconds`` (default: the same)."""
    head = b"OpusHead" + bytes([1, 1]) + struct.pack("<HIhB", 312, 48_000, 0, 0)
    tags = b"OpusTags" + struct.pack("<I", 0) + struct.pack("<I", 0)
    pages = [_ogg_page(1, 0, 0, [head], flags=2), _ogg_page(1, 1, 0, [tags])]
    n = round(seconds * 1000 / packet_ms)
    said = seconds if granule_seconds is None else granule_seconds
    for seq, i in enumerate(range(0, n, 50), start=2):
        k = min(50, n - i)
        granule = 312 + round(said * 48_000 * (i + k) / n)
        pages.append(_ogg_page(1, seq, granule, [packet] * k))
    return b"".join(pages)


@dataclass
class Heard:
    model: str
    filename: str
    content_type: str
    audio: bytes
    authorization: str | None


@dataclass
class FakeSpeech:
    transcript: str = "what is the weather in Lyon tomorrow"
    failing: bool = False
    stall: asyncio.Event | None = None
    # What a transcription answers instead of ``{"text": transcript}``: another JSON body, or bytes as they are,
    # with ``status``.
    answer: dict[str, Any] | bytes | None = None
    status: int = 200
    arrived: int = 0
    in_flight: int = 0
    most_in_flight: int = 0
    heard: list[Heard] = field(default_factory=list)
    said: list[dict[str, Any]] = field(default_factory=list)
    port: int = 0
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        app.router.add_post("/v1/audio/speech", self._speak)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _transcribe(self, request: web.Request) -> web.Response:
        self.arrived += 1
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            form = await request.post()
            upload = form.get("file")
            if not isinstance(upload, web.FileField):
                return web.json_response({"error": {"message": "file is required"}}, status=400)
            self.heard.append(Heard(str(form.get("model")), upload.filename, upload.content_type, upload.file.read(),
                                    request.headers.get("Authorization")))
            if self.stall is not None:
                await self.stall.wait()
            if isinstance(self.answer, bytes):
                return web.Response(body=self.answer, status=self.status, content_type="text/plain")
            return web.json_response({"text": self.transcript} if self.answer is None else self.answer,
                                     status=self.status)
        finally:
            self.in_flight -= 1

    @property
    def bytes_heard(self) -> int:
        """Every byte of audio sent to be transcribed so far."""
        return sum(len(h.audio) for h in self.heard)

    async def _speak(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.said.append(body)
        if self.failing:
            return web.json_response({"error": {"message": "upstream is having a bad hour"}}, status=502)
        return web.Response(body=tone_wav(0.75), content_type="audio/wav")
