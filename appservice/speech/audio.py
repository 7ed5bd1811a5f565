"""What a voice message needs to know about its audio, read from the bytes alone. Pure.

- ``sniff``: whether bytes are audio at all, by their magic (a file's mimetype is what its sender claims).
- ``seconds``: how long it plays — a WAV's from its header, an Ogg's (Opus) from its last page's granule
  position less the Opus pre-skip; None when it cannot be told. What a voice message we made says of itself.
- ``bound``: the most a voice note somebody sent can play for, for deciding whether to hear it and what hearing
  it may cost — never the sender's word (their ``info.duration``, their Ogg granules) alone. An Ogg Opus file is
  measured by what a decoder plays: every packet's own duration, read off its TOC byte (RFC 6716 §3.1), however
  its pages are cut; a PCM WAV by its samples and the rate its header gives (what any decoder plays it at). Any
  other file — or one that does not read as what it starts like — is bounded by its bytes: its size over a floor
  bit-rate no voice codec goes below (Opus's own floor for speech, 6 kbit/s: 750 bytes a second), so a 20 MiB
  note cannot claim ten minutes. It stops counting once it is past ``limit`` (enough to refuse), so a note
  built of millions of tiny packets costs no more to bound than a real one.
- ``waveform``: a voice message's bars (0-1024) — a WAV's from its samples' peak per bar; an Ogg Opus's from its
  pages' sizes per bar (Opus is variable-rate: louder speech takes more bytes, so the envelope of the bit rate
  draws the shape of the speech without decoding it).
"""

from __future__ import annotations

import struct
from itertools import accumulate

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
        pre_skip = struct.unpack_from("<H", data, 38)[0] if data[28:36] == b"OpusHead" and len(data) >= 40 else 0
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


# --- the bound on what a voice note plays for ------------------------------------------------------------

FLOOR_BYTES_PER_SECOND = 750.0  # 6 kbit/s: Opus's floor for speech; nothing a client records a voice note in is lower
_WAV_CHUNKS = 64  # a WAV whose samples are not found within this many chunks is bounded by its bytes
# Frame length (ms) by an Opus TOC byte's configuration (its top 5 bits): SILK 10/20/40/60, hybrid 10/20,
# CELT 2.5/5/10/20 (RFC 6716 §3.1, table 2).
_OPUS_FRAME_MS = ([10.0, 20.0, 40.0, 60.0] * 3 + [10.0, 20.0] * 2 + [2.5, 5.0, 10.0, 20.0] * 4)
_OPUS_PACKET_MS = 120.0  # the most one packet may play (§3.2.5); a malformed one is counted as that much
_EMPTY_PAGE_MS = 20.0
# Uncompressed WAV encodings, whose header's rate is what a decoder plays the bytes at: PCM, IEEE float, A-law,
# µ-law (and WAVE_FORMAT_EXTENSIBLE when its sub-format is one of them).
_WAV_PLAIN = frozenset({1, 3, 6, 7})


def _opus_packet_ms(first: bytes) -> float:
    """How long an Opus packet plays, from its first two bytes (``first``, fewer when the packet is shorter)."""
    if not first:
        return _OPUS_PACKET_MS  # an empty packet: the decoder conceals a lost frame of unknown length
    toc = first[0]
    frame = _OPUS_FRAME_MS[toc >> 3]
    code = toc & 3
    if code == 0:
        frames = 1
    elif code in (1, 2):
        frames = 2
    elif len(first) < 2:
        return _OPUS_PACKET_MS
    else:
        frames = first[1] & 0x3F
    played = frames * frame
    return played if 0 < played <= _OPUS_PACKET_MS else _OPUS_PACKET_MS


def _ogg_opus_seconds(data: bytes, limit: float) -> float | None:
    """What an Ogg Opus file plays for, summed from its packets (past ``limit``: the first sum over it), or
    None when it is not one stream of Ogg Opus. The sender's granule positions count too, where they say more."""
    at, serial, played_ms, granule, pre_skip = 0, None, 0.0, 0, 0
    packets = 0  # whole packets so far: the first two are the headers (OpusHead, OpusTags)
    head = b""  # the first bytes of the packet being read (it may run across pages)
    limit_ms = limit * 1000.0
    while at + 27 <= len(data) and data[at:at + 4] == b"OggS":
        page_serial = struct.unpack_from("<I", data, at + 14)[0]
        if serial is None:
            serial = page_serial
        elif page_serial != serial:
            return None  # chained or multiplexed streams: bounded by the bytes instead
        granule = max(granule, struct.unpack_from("<q", data, at + 6)[0])
        count = data[at + 26]
        lacing = data[at + 27:at + 27 + count]
        body = at + 27 + count
        if len(lacing) < count:
            break
        if packets > 1 and lacing.count(255) == count:
            # A page that ends no packet plays nothing by itself; counted as a frame all the same (20 ms), so a
            # note of empty pages is bounded by its pages as well as by its packets.
            played_ms += _EMPTY_PAGE_MS
            if played_ms > limit_ms:
                return played_ms / 1000.0
        elif packets > 1 and not head and 255 not in lacing:
            # The usual page: whole packets, one segment each, nothing carried over (read without the general loop).
            for start, size in zip(accumulate(lacing, initial=body), lacing, strict=False):  # one start more
                if start >= len(data):
                    break  # cut short: what is not there does not play
                played_ms += _opus_packet_ms(data[start:start + min(size, 2)])
            packets += count
            if played_ms > limit_ms:
                return played_ms / 1000.0
            at = body + sum(lacing)
            continue
        for size in lacing:
            if not head and body >= len(data):
                break  # cut short: a packet that is not there does not play
            if len(head) < 8:
                head += data[body:body + min(size, 8 - len(head))]
            body += size
            if size == 255:
                continue  # the packet goes on in the next segment
            if packets == 0:
                if not head.startswith(b"OpusHead"):
                    return None
                whole = data[body - size:body] if size >= 12 else b""
                pre_skip = struct.unpack_from("<H", whole, 10)[0] if len(whole) >= 12 else 0
            elif packets > 1:
                played_ms += _opus_packet_ms(head[:2])
                if played_ms > limit_ms:
                    return played_ms / 1000.0
            packets += 1
            head = b""
        at = body
    if serial is None or packets == 0:
        return None
    return max(played_ms / 1000.0, (granule - pre_skip) / OPUS_RATE if granule > pre_skip else 0.0)


def _wav_seconds(data: bytes) -> float | None:
    """What an uncompressed WAV plays for, from its samples and its header's rate, or None."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return None
    at, per_second = 12, 0.0
    for _ in range(_WAV_CHUNKS):
        if at + 8 > len(data):
            return None
        kind, size = data[at:at + 4], struct.unpack_from("<I", data, at + 4)[0]
        body = data[at + 8:at + 8 + size]
        if kind == b"fmt " and len(body) >= 16:
            tag, channels, rate, byte_rate, block, bits = struct.unpack_from("<HHIIHH", body)
            if tag == 0xFFFE and len(body) >= 26:
                tag = struct.unpack_from("<H", body, 24)[0]  # the sub-format's first two bytes are its tag
            if tag not in _WAV_PLAIN or channels < 1 or rate < 1:
                return None
            # Whichever of the header's ways of saying it plays the bytes slowest: a decoder may read any of them.
            rates = [x for x in (byte_rate, rate * block, rate * channels * bits // 8) if x > 0]
            if not rates:
                return None
            per_second = float(min(rates))
        elif kind == b"data":
            return len(body) / per_second if per_second > 0 else None
        at += 8 + size + (size & 1)
    return None


def bound(data: bytes, *, limit: float, floor_bytes_per_second: float = FLOOR_BYTES_PER_SECOND) -> float:
    """The most ``data`` plays for, in seconds — measured (Ogg Opus, PCM WAV) or by its bytes over the floor
    bit-rate (anything else) — counted no further than just past ``limit``."""
    if data[:4] == b"OggS":
        measured = _ogg_opus_seconds(data, limit)
    elif data[:4] == b"RIFF":
        measured = _wav_seconds(data)
    else:
        measured = None
    if measured is not None:
        return measured
    return len(data) / floor_bytes_per_second
