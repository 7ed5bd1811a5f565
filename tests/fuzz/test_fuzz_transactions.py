"""Fuzz: the transaction body parser — whatever bytes a homeserver (or anyone holding its token) PUTs:
no exception, every case within 100 ms, and a body that is no transaction says why in one clear line."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from appservice.matrix.inbound.transactions import BadBody, Transaction, read_transaction
from tests.fuzz.budget import FUZZ, clear, outcome, within_budget

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=8,
)
# Values of every JSON kind, cheap to draw (a lone surrogate and a NUL among them), so the slice stays fast.
SMALL = st.sampled_from([None, True, False, 0, -1, 2**64, 1.5, -0.0, 1e308, "", "x", "\x00", "\ud800", "é", [],
                         ["x"], {}, {"a": None}, [[[]]]])
EVENT = st.fixed_dictionaries(
    {"type": st.sampled_from(["m.room.message", "m.room.member", "m.reaction"]) | SMALL,
     "content": st.dictionaries(st.sampled_from(["body", "msgtype", "formatted_body", "m.relates_to"]), SMALL,
                                max_size=3) | SMALL},
    optional={"event_id": st.just("$e") | SMALL, "room_id": st.just("!r:hs") | SMALL},
)
BODIES = st.fixed_dictionaries({}, optional={
    "events": st.lists(EVENT | SMALL, max_size=5) | SMALL,
    "ephemeral": st.lists(SMALL, max_size=3) | SMALL,
    "de.sorunome.msc2409.ephemeral": st.lists(SMALL, max_size=3) | SMALL,
    "txn_id": SMALL,
}) | JSON


@st.composite
def raw_bodies(draw: st.DrawFn) -> bytes:
    """Bytes as a sender might send them: JSON, JSON cut or spliced, nesting, other encodings, noise."""
    shape = draw(st.sampled_from(["json", "cut", "spliced", "nested", "encoded", "noise", "constants"]))
    text = json.dumps(draw(BODIES), allow_nan=True)
    if shape == "json":
        return text.encode()
    if shape == "cut":
        return text.encode()[: draw(st.integers(0, len(text)))]
    if shape == "spliced":
        at = draw(st.integers(0, len(text)))
        return (text[:at] + draw(st.text(max_size=10)) + text[at:]).encode("utf-8", "surrogatepass")
    if shape == "nested":
        depth = draw(st.integers(1, 5_000))  # past the parser's recursion limit too
        return b'{"events": ' + b"[" * depth + b"]" * draw(st.integers(0, depth)) + b"}"
    if shape == "encoded":
        return text.encode(draw(st.sampled_from(["utf-16", "utf-32", "latin-1"])), "replace")
    if shape == "constants":
        return draw(st.sampled_from([b'{"events": [NaN]}', b"Infinity", b'{"x": -Infinity}', b"1" * 5000]))
    return draw(st.binary(max_size=300))


@FUZZ
@given(raw_bodies())
def test_any_body_is_read_or_refused_clearly_in_time(body: bytes) -> None:
    read: Any = within_budget("transaction body parser", lambda: read_transaction(body), len(body))
    if isinstance(read, BadBody):
        outcome("transaction body parser", f"refused {read.errcode}")
        assert read.errcode in ("M_NOT_JSON", "M_BAD_JSON")
        assert clear(read.message), read.message
        return
    outcome("transaction body parser", "a transaction")
    assert isinstance(read, Transaction)
    assert all(isinstance(event, dict) for event in read.events)
    assert all(isinstance(event, dict) for event in read.ephemeral)
