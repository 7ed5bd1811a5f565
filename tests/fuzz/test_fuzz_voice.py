"""Fuzz: voice notes (issue 24, item 3 and the voice part of 15) — what a sender's voice note says of itself (its
link, size, length and type, read before anything is fetched) and what its bytes say (sniffed and bounded before
anything is paid: Ogg pages with any lacing, granules and streams, WAV headers with any chunks and rates, and
anything else), and what a transcription endpoint answers. No exception, every case within 100 ms, a link only
ever followed when it is a content URI, a note only ever heard when nothing it claims refuses it, and a bound
that is a number of seconds no smaller than what the note's packets or samples play."""

from __future__ import annotations

import math
import struct
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from appservice.matrix.asking.voice_claims import VOICE_WORDS, claimed_refusal, media_parts
from appservice.matrix.inbound.said import read_event
from appservice.speech import audio
from appservice.speech.endpoints import _heard_seconds
from tests.fuzz.budget import FUZZ, outcome, within_budget

MAX_BYTES = 20 * 1024 * 1024
MAX_SECONDS = 600.0
JUNK = st.sampled_from([None, True, False, 0, -1, 2**70, -(2**70), 1.5, -0.0, float("inf"), float("-inf"),
                        float("nan"), "", "x", "20", [], ["x"], {}, {"a": 1}])

# Pieces content URIs are made of, good and hostile, so generated links reach every part of the grammar.
_URL_PIECES = st.sampled_from([
    "mxc://", "mxc:/", "MXC://", "https://", "localhost", "matrix.org", "example.org:8448", "127.0.0.1", "[::1]",
    "[2001:db8::1]:443", ":", "/", "//", ".", "..", "../", "%2e%2e", "%2F", "?", "#", "=", "&", " ", "\n", "\x00",
    "\\", "@", "a" * 64, "AbCdEf0123_-", "é", "\U0001f600", "x" * 300, "-", "_",
])
URLS = st.one_of(
    st.lists(_URL_PIECES, max_size=12).map("".join),
    st.text(max_size=120),
    st.sampled_from(["mxc://localhost/abcDEF123", "mxc://../..", "mxc://./..", "mxc://localhost/..",
                     "mxc://localhost/a/b", "mxc://[::1]:8448/x_y-z", "mxc://a..b/x", "mxc://-/x"]),
)
NUMBERS = st.one_of(st.integers(-(2**64), 2**64), st.floats(allow_nan=True, allow_infinity=True), JUNK)
MIMETYPES = st.sampled_from(["audio/ogg", "audio/ogg; codecs=opus", "audio/mpeg", "audio/wav", "video/mp4",
                             "application/pdf", "", "AUDIO/OGG", "audio/"])
_GOOD_SERVERS = ["localhost", "matrix.org", "example.org:8448", "127.0.0.1", "[::1]", "[2001:db8::1]:443", "a-b.c"]
_SERVERS = st.sampled_from(_GOOD_SERVERS * 3 + ["..", ".", "", "a..b", "x" * 64 + ".org", "h st", "é.org", "a:"])
_MEDIA = st.sampled_from(["abcDEF123", "x_y-z", "0", "x" * 255] * 3
                         + ["..", ".", "", "a/b", "a?b=1", "a#b", "a%2Fb", "x" * 256, "é", "a\n"])
URLS = st.one_of(st.tuples(st.sampled_from(["mxc://"] * 6 + ["mxc:/", "https://"]), _SERVERS,
                           st.sampled_from(["/"] * 6 + ["//", "/../"]), _MEDIA).map("".join), URLS)


@st.composite
def mostly(draw: st.DrawFn, valid: st.SearchStrategy[Any]) -> Any:
    """``valid`` 15 times in 16, else a value of the wrong shape: most notes get far enough to be read."""
    return draw(JUNK) if draw(st.integers(0, 15)) == 11 else draw(valid)


@st.composite
def voice_contents(draw: st.DrawFn) -> dict[str, Any]:
    content: dict[str, Any] = {"msgtype": draw(mostly(st.sampled_from(["m.audio"] * 6 + ["m.file", "m.text"]))),
                               "body": draw(mostly(st.sampled_from(["Voice message", ""]))),
                               "org.matrix.msc3245.voice": draw(mostly(st.just({})))}
    if draw(st.integers(0, 7)) != 3:
        content["url"] = draw(mostly(URLS))
    else:
        content["file"] = draw(mostly(st.fixed_dictionaries({"url": mostly(URLS)})))
    if draw(st.integers(0, 7)) != 3:
        content["info"] = draw(mostly(st.fixed_dictionaries({}, optional={
            "size": mostly(st.integers(0, 2 * MAX_BYTES) | NUMBERS),
            "duration": mostly(st.integers(0, 2_000_000) | NUMBERS), "mimetype": mostly(MIMETYPES)})))
    if draw(st.booleans()):
        content["org.matrix.msc1767.audio"] = draw(mostly(st.fixed_dictionaries(
            {"duration": NUMBERS, "waveform": st.lists(st.integers(-5, 2000) | JUNK, max_size=8)})))
    return content


def _as_hold_reads(content: dict[str, Any]) -> tuple[str | None, str | None] | None:
    line = read_event({"type": "m.room.message", "event_id": "$note", "room_id": "!room:localhost",
                       "sender": "@alice:localhost", "origin_server_ts": 1, "content": content})
    if line is None or not line.is_voice:
        return None
    return line.media_url, claimed_refusal(content, line.media_url, max_bytes=MAX_BYTES, max_seconds=MAX_SECONDS)


@FUZZ
@given(voice_contents())
def test_any_voice_notes_claims_are_read_without_a_crash_in_time(content: dict[str, Any]) -> None:
    read = within_budget("voice-note claims", lambda: _as_hold_reads(content), len(repr(content)))
    if read is None:
        outcome("voice-note claims", "not a voice note")
        return
    url, why = read
    outcome("voice-note claims", why or "held")
    assert why is None or why in VOICE_WORDS
    if why is not None:
        return
    # Held: its link is a content URI (never a path on the homeserver), and nothing it claims is over a cap.
    assert url is not None
    parts = media_parts(url)
    assert parts is not None and url == f"mxc://{parts[0]}/{parts[1]}"
    assert ".." not in url and "/" not in parts[1] and "?" not in url and "#" not in url
    info = content.get("info")
    if isinstance(info, dict):
        for key, cap in (("size", MAX_BYTES), ("duration", MAX_SECONDS * 1000)):
            value = info.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                assert not value > cap


@FUZZ
@given(URLS)
def test_any_link_is_a_content_uri_or_not_without_a_crash_in_time(url: str) -> None:
    parts = within_budget("content URIs", lambda: media_parts(url), len(url))
    outcome("content URIs", "a content URI" if parts is not None else "refused")
    if parts is not None:
        server, media = parts
        assert url == f"mxc://{server}/{media}" and server and media
        assert all(label not in ("", ".", "..") for label in server.split(":")[0].split("."))


# --- the bytes ---------------------------------------------------------------------------------------------

HEAD = b"OpusHead" + bytes([1, 1]) + struct.pack("<HIhB", 312, 48_000, 0, 0)
TAGS = b"OpusTags" + struct.pack("<I", 0) * 2
PACKETS = st.one_of(
    st.binary(max_size=3),
    st.sampled_from([b"\x78" + b"U" * 40, b"\x7b\x06", b"\x7b", b"\x80", b"\x89\x00", b"\xfb\x3f\x00", b""]),
    st.binary(min_size=200, max_size=700),  # spans segments (lacing values of 255)
)


@st.composite
def ogg(draw: st.DrawFn) -> bytes:
    pages = []
    if draw(st.integers(0, 5)) != 2:
        pages.append((1, 0, [HEAD if draw(st.integers(0, 5)) != 2 else draw(st.binary(max_size=20))]))
        pages.append((1, 0, [TAGS]))
    for _ in range(draw(st.integers(0, 6))):
        serial = draw(st.sampled_from([1, 1, 1, 1, 2]))
        granule = draw(st.sampled_from([0, -1, 48_000, 2**62, -(2**63)]) | st.integers(0, 10**8))
        pages.append((serial, granule, draw(st.lists(PACKETS, max_size=40))))
    data = b""
    for seq, (serial, granule, packets) in enumerate(pages):
        lacing = b""
        body = b""
        for packet in packets:
            lacing += b"\xff" * (len(packet) // 255) + bytes([len(packet) % 255])
            body += packet
        if len(lacing) > 255:
            lacing, body = lacing[:255], body  # lacing that does not account for its body: as a hostile file has it
        flags = draw(st.sampled_from([0, 1, 2, 4, 255]))
        data += (b"OggS" + bytes([0, flags]) + struct.pack("<qIII", granule, serial, seq, 0) + bytes([len(lacing)])
                 + lacing + body)
    cut = draw(st.integers(0, len(data)))
    return data[:cut] if draw(st.integers(0, 3)) == 1 else data


@st.composite
def wav(draw: st.DrawFn) -> bytes:
    chunks = b""
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from([b"fmt ", b"data", b"LIST", b"fact", b"\x00\x00\x00\x00"]))
        if kind == b"fmt ":
            body = struct.pack("<HHIIHH", draw(st.sampled_from([1, 3, 6, 7, 0x55, 0xFFFE, 0, 2])),
                               draw(st.integers(0, 8)), draw(st.integers(0, 2**32 - 1)),
                               draw(st.integers(0, 2**32 - 1)), draw(st.integers(0, 2**16 - 1)),
                               draw(st.sampled_from([0, 8, 16, 24, 32, 7])))
            body += draw(st.binary(max_size=26))
        else:
            body = draw(st.binary(max_size=4000))
        size = len(body) if draw(st.integers(0, 4)) != 2 else draw(st.integers(0, 2**32 - 1))
        chunks += kind + struct.pack("<I", size) + body
    riff = b"RIFF" + struct.pack("<I", 4 + len(chunks)) + draw(st.sampled_from([b"WAVE", b"WAVE", b"AVI "]))
    return riff + chunks


BYTES = st.one_of(
    ogg(), wav(),
    st.tuples(st.sampled_from([b"RIFF", b"OggS", b"ID3", b"fLaC", b"\x1aE\xdf\xa3", b"\xff\xfb", b"\x00\x00\x00\x20ftyp",
                               b"%PDF", b""]), st.binary(max_size=3000)).map(b"".join),
    st.binary(max_size=200),
)


def _as_hearing_reads(data: bytes) -> tuple[bool, float, float | None, list[int]]:
    return (audio.sniff(data), audio.bound(data, limit=MAX_SECONDS), audio.seconds(data), audio.waveform(data))


@FUZZ
@given(BYTES)
def test_any_voice_notes_bytes_are_bounded_without_a_crash_in_time(data: bytes) -> None:
    sniffed, bound, seconds, bars = within_budget("voice-note bytes", lambda: _as_hearing_reads(data), len(data))
    outcome("voice-note bytes", ("audio" if sniffed else "not audio") + (", over the limit" if bound > MAX_SECONDS
                                                                        else ""))
    assert isinstance(bound, float) and bound >= 0 and not math.isnan(bound)
    assert seconds is None or (seconds >= 0 and not math.isnan(seconds))
    assert len(bars) == audio.BARS and all(0 <= b <= audio.TOP for b in bars)
    if data[:4] not in (b"OggS", b"RIFF"):
        assert bound == len(data) / audio.FLOOR_BYTES_PER_SECOND  # nothing to measure: by its bytes
    # A smaller limit never bounds a note as shorter than it plays up to that limit.
    assert audio.bound(data, limit=1.0) >= min(bound, 1.0) - 1e-9


ANSWERS = st.one_of(JUNK, NUMBERS, st.text(max_size=10), st.dictionaries(
    st.sampled_from(["type", "seconds", "x"]), JUNK | NUMBERS | st.sampled_from(["duration", "tokens"]), max_size=3))


@FUZZ
@given(st.dictionaries(st.sampled_from(["text", "usage", "duration", "x"]), ANSWERS | st.fixed_dictionaries(
    {"type": st.sampled_from(["duration", "tokens"]) | JUNK, "seconds": NUMBERS}), max_size=4))
def test_any_transcription_answer_says_how_long_it_heard_or_nothing(answer: dict[str, Any]) -> None:
    said = within_budget("transcription answers", lambda: _heard_seconds(answer), len(repr(answer)))
    outcome("transcription answers", "a length" if said is not None else "none")
    assert said is None or (isinstance(said, float) and 0 <= said < 1e7)
