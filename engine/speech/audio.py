"""What a voice message needs to know about its audio, read from the bytes alone. Pure.

- ``sniff``: whether bytes are audio at all, by their magic (a file's mimetype is what its sender claims).
- ``seconds``: how long it plays — a WAV's from its header, an Ogg's (Opus) from its last page's granule
  position less the Opus pre-skip; None when it cannot be told.
- ``waveform``: a voice message's bars (0-1024) — a WAV's from its samples' peak per bar; an Ogg Opus's from its
  pages' sizes per bar (Opus is variable-rate: louder speech takes more bytes, so the envelope of the bit rate
  draws the shape of the speech without decoding it).
"""

from __future__ import annotations

import struct

BARS = 64
TOP = 1024
OPUS_RATE = 48_000

_MAGIC = (b"RIFF", b"OggS", b"ID3", b"fLaC", b"\x1aE\xdf\xa3", b"\xff\xfb", b"\xff\xf3", b"\xff\xf2", b"\xff\xf1",
          b"\xff\xf9")


def sniff(data: bytes) -> bool:
    """Whether ``data`` starts like an audio file (WAV, Ogg, MP3, FLAC, WebM/Matroska, AAC, MP4/M4A)."""
    if data[:4] == b"RIFF" and data[8:12] != b"WAVE":
        return False
    return data.startswith(_MAGIC) or data[4:8] == b"ftyp"


def _wav(data: bytes) -> tuple[int, int, int, bytes] | None:
    """(rate, channels, bits, samples) of a PCM WAV, or None."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return None
    at, fmt = 12, None
    while at + 8 <= len(data):
        kind, size = data[at:at + 4], struct.unpack_from("<I", data, at + 4)[0]
        body = data[at + 8:at + 8 + size]
        if kind == b"fmt " and len(body) >= 16:
            tag, channels, rate, _, _, bits = struct.unpack_from("<HHIIHH", body)
            fmt = (tag, channels, rate, bits)
        elif kind == b"data" and fmt is not None:
            tag, channels, rate, bits = fmt
            if tag != 1 or bits not in (8, 16) or channels < 1 or rate < 1:
                return None
            return rate, channels, bits, body
        at += 8 + size + (size & 1)
    return None


def _ogg_pages(data: bytes) -> list[tuple[int, int]]:
    """(granule position, payload bytes) of each Ogg page."""
    pages, at = [], 0
    while at + 27 <= len(data) and data[at:at + 4] == b"OggS":
        granule = struct.unpack_from("<q", data, at + 6)[0]
        count = data[at + 26]
        lacing = data[at + 27:at + 27 + count]
        size = sum(lacing)
        pages.append((granule, size))
        at += 27 + count + size
    return pages


def seconds(data: bytes) -> float | None:
    wav = _wav(data)
    if wav is not None:
        rate, channels, bits, samples = wav
        return len(samples) / (rate * channels * bits // 8)
    pages = _ogg_pages(data)
    if pages:
        pre_skip = struct.unpack_from("<H", data, 28 + 10)[0] if data[28:36] == b"OpusHead" else 0
        last = max(g for g, _ in pages)
        return max(0.0, (last - pre_skip) / OPUS_RATE) if last > 0 else None
    return None


def _bars(levels: list[float], bars: int) -> list[int]:
    if not levels:
        return [0] * bars
    top = max(levels) or 1.0
    out = []
    for n in range(bars):
        part = levels[n * len(levels) // bars:max(n * len(levels) // bars + 1, (n + 1) * len(levels) // bars)]
        out.append(round(max(part) / top * TOP) if part else 0)
    return out


def waveform(data: bytes, bars: int = BARS) -> list[int]:
    wav = _wav(data)
    if wav is not None:
        _, _, bits, samples = wav
        if bits == 16:
            values = [abs(v) for v in struct.unpack(f"<{len(samples) // 2}h", samples[:len(samples) // 2 * 2])]
        else:
            values = [abs(b - 128) for b in samples]
        step = max(1, len(values) // (bars * 8))
        return _bars([float(v) for v in values[::step]], bars)
    pages = _ogg_pages(data)
    return _bars([float(size) for _, size in pages[2:]], bars)  # the first two pages are the headers
