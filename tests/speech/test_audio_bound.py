"""What a voice note plays for, bounded from its bytes (issue 24, item 3): never the sender's word. An Ogg Opus
stream is measured by its packets' own durations (their TOC bytes), whatever its granule positions claim; a PCM
WAV by its samples and its header's rate (the slowest of the header's ways of saying it); anything else by its
size over a floor bit-rate (6 kbit/s), so a 20 MiB note cannot claim ten minutes. Counting stops just past the
limit, so a note built to be slow to bound is bounded as soon as it is over. Pure: tables of cases."""

from __future__ import annotations

import struct

import pytest

from appservice.speech import audio
from tests.speech.fake_speech import _ogg_page, opus_ogg, tone_wav

HEAD = b"OpusHead" + bytes([1, 1]) + struct.pack("<HIhB", 312, 48_000, 0, 0)
TAGS = b"OpusTags" + struct.pack("<I", 0) * 2


def wav(data: bytes, *, tag: int = 1, channels: int = 1, rate: int = 16_000, byte_rate: int | None = None,
        block: int = 2, bits: int = 16, sub_format: int | None = None) -> bytes:
    fmt = struct.pack("<HHIIHH", tag, channels, rate, rate * block if byte_rate is None else byte_rate, block, bits)
    if sub_format is not None:  # WAVE_FORMAT_EXTENSIBLE: cbSize, valid bits, channel mask, the sub-format's GUID
        fmt += struct.pack("<HHI", 22, bits, 4) + struct.pack("<H", sub_format) + bytes(14)
    return (b"RIFF" + struct.pack("<I", 4 + 8 + len(fmt) + 8 + len(data)) + b"WAVE" + b"fmt "
            + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data)


@pytest.mark.parametrize(("name", "note", "seconds"), [
    ("ogg opus, 20 ms packets", opus_ogg(3.0), 3.0),
    ("ogg opus whose granules claim 2 s of 60 s of 120 ms packets",
     opus_ogg(60.0, packet=b"\x7b\x06", packet_ms=120.0, granule_seconds=2.0), 60.0),
    ("ogg opus whose granules claim more than its packets play", opus_ogg(2.0, granule_seconds=9.0), 9.0),
    ("ogg opus of two-frame 10 ms CELT packets (code 1)", opus_ogg(4.0, packet=b"\x89" + b"\x00" * 30,
                                                                    packet_ms=20.0), 4.0),
    ("ogg opus of code-3 packets too short to say their frames: 120 ms each",
     opus_ogg(1.2, packet=b"\x7b", packet_ms=120.0, granule_seconds=0.0), 1.2),
    ("pcm wav", tone_wav(2.5), 2.5),
    ("a wav whose byte rate says it plays slower than its rate does", wav(b"\0" * 32_000, byte_rate=8_000), 4.0),
    ("a float wav", wav(b"\0" * 64_000, tag=3, block=4, bits=32), 1.0),
    ("an extensible wav whose sub-format is pcm", wav(b"\0" * 32_000, tag=0xFFFE, sub_format=1), 1.0),
])
def test_a_note_plays_for_what_its_bytes_say(name: str, note: bytes, seconds: float) -> None:
    assert audio.bound(note, limit=600.0) == pytest.approx(seconds, rel=1e-3), name


@pytest.mark.parametrize(("name", "note"), [
    ("mp3", b"ID3\x04\x00\x00\x00\x00\x00\x00" + b"\xff\xfb\x90\x00" * 10_000),
    ("m4a", b"\x00\x00\x00\x20ftypM4A " + b"\x00" * 40_000),
    ("webm", b"\x1aE\xdf\xa3" + b"\x00" * 9_000),
    ("flac", b"fLaC" + b"\x00" * 75_000),
    ("ogg vorbis (not opus)", _ogg_page(1, 0, 0, [b"\x01vorbis" + b"\x00" * 22], flags=2) + b"\x00" * 5_000),
    ("two interleaved ogg streams", _ogg_page(1, 0, 0, [HEAD], flags=2) + _ogg_page(2, 0, 0, [HEAD], flags=2)
     + b"\x00" * 7_000),
    ("a compressed wav (mp3 inside, tag 0x55), whatever its header's rate", wav(b"\xff\xfb" * 6_000, tag=0x55,
                                                                                 byte_rate=10**9)),
    ("an extensible wav whose sub-format is mp3", wav(b"\xff\xfb" * 6_000, tag=0xFFFE, sub_format=0x55,
                                                     byte_rate=10**9)),
    ("a wav cut short before its samples", wav(b"\0" * 32_000)[:40]),
    ("a wav with its samples before its format", b"RIFF\x00\x00\x00\x00WAVEdata" + struct.pack("<I", 4) + b"\0" * 4
     + b"\0" * 3_000),
])
def test_a_note_that_cannot_be_measured_is_bounded_by_its_bytes_at_the_floor(name: str, note: bytes) -> None:
    assert audio.bound(note, limit=600.0) == pytest.approx(len(note) / 750.0), name
    assert audio.bound(note, limit=600.0, floor_bytes_per_second=1_500.0) == pytest.approx(len(note) / 1_500.0)


def test_twenty_mebibytes_cannot_claim_ten_minutes() -> None:
    big = b"ID3" + b"\0" * (20 * 1024 * 1024 - 3)
    assert audio.bound(big, limit=600.0) > 7 * 3600  # 20 MiB at 6 kbit/s: nearly eight hours


@pytest.mark.parametrize(("name", "note"), [
    # Hundreds of thousands of empty pages: each counted as a frame, so bounded as soon as it is over.
    ("empty pages", _ogg_page(1, 0, 0, [HEAD], flags=2) + _ogg_page(1, 1, 0, [TAGS])
     + _ogg_page(1, 2, 0, []) * 200_000),
    # A million one-byte packets of 2.5 ms each.
    ("tiny packets", _ogg_page(1, 0, 0, [HEAD], flags=2) + _ogg_page(1, 1, 0, [TAGS])
     + _ogg_page(1, 2, 0, [b"\x80"] * 255) * 4_000),
    # Empty packets (a decoder conceals a lost frame of unknown length): 120 ms each.
    ("empty packets", _ogg_page(1, 0, 0, [HEAD], flags=2) + _ogg_page(1, 1, 0, [TAGS])
     + _ogg_page(1, 2, 0, [b""] * 255) * 100),
])
def test_a_note_built_to_be_slow_to_bound_is_over_the_limit_as_soon_as_it_is(name: str, note: bytes) -> None:
    found = audio.bound(note, limit=600.0)
    assert 600.0 < found < 600.0 + 255 * 0.120 + 0.1, name  # at most a page past the limit


def test_an_ogg_opus_cut_short_is_bounded_by_what_it_has() -> None:
    whole = opus_ogg(3.0)
    assert audio.bound(whole[: len(whole) // 2], limit=600.0) < 3.0
    assert audio.bound(whole[:20], limit=600.0) == pytest.approx(20 / 750.0)  # not even a page: by its bytes


def test_an_ogg_cut_inside_its_opus_head_is_read_without_a_crash() -> None:
    # A file cut inside its OpusHead (as the fuzz cuts them): the pre-skip is not read past its end.
    cut = _ogg_page(1, 0, 0, [HEAD], flags=2)[:38]
    assert audio.seconds(cut) is None
    assert audio.bound(cut, limit=600.0) >= 0
