"""Door grants, pure: minted and verified with ``now`` handed in. Every field tampered, a forged or
truncated token, an unknown key, another audience, an expired grant: all the same ``GrantRefused``."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from appservice.door import grants
from appservice.door.errors import GrantRefused
from appservice.door.grants import Grant, mint, new_grant, verify
from engine.core.limits import Ceilings

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
KEYS = {"k1": "k1-secret-" + "x" * 32, "k2": "k2-secret-" + "y" * 32}
AUD = "summon-door:example.org"
CEILINGS = Ceilings(steps=8, spend=0.25, minutes=5.0, per={"hour": 2.0, "day": 5.0})


def a_grant(**changes: Any) -> Grant:
    fields: dict[str, Any] = {"bot": "helper", "person": "@alice:example.org", "room": "!room:example.org",
                              "audience": AUD, "ceilings": CEILINGS, "now": NOW, "minutes": 15, "minted_by": "start"}
    fields.update(changes)
    return new_grant(**fields)


def parts(token: str) -> tuple[str, str, dict[str, Any], str]:
    version, key_id, payload, signature = token.split(".")
    return version, key_id, json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))), signature


def encode(fields: dict[str, Any]) -> str:
    raw = json.dumps(fields, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def signed(version: str, key_id: str, fields: dict[str, Any], key: str) -> str:
    head = f"{version}.{key_id}.{encode(fields)}"
    sig = hmac.new(key.encode(), head.encode(), hashlib.sha256).digest()
    return f"{head}.{base64.urlsafe_b64encode(sig).rstrip(b'=').decode()}"


def test_a_grant_minted_verifies_to_itself() -> None:
    grant = a_grant()
    got = verify(mint(grant, "k1", KEYS["k1"]), KEYS, audience=AUD, now=NOW + timedelta(minutes=1))
    assert got == grant
    assert got.expires_at - got.issued_at == timedelta(minutes=15)
    assert got.ceilings == CEILINGS


def test_every_grant_has_an_id_of_its_own() -> None:
    assert len({a_grant().id for _ in range(50)}) == 50


TAMPERED: list[tuple[str, Any]] = [
    ("v", 2), ("id", "A" * 24), ("bot", "echo"), ("sub", "@mallory:example.org"), ("room", "!other:example.org"),
    ("room", None), ("aud", "summon-door:elsewhere.org"), ("iat", 1), ("exp", 4102444800),
    ("by", "operator"), ("lim.steps", 1000), ("lim.spend", 1000.0), ("lim.minutes", 600.0),
    ("lim.per", {}), ("lim.per", {"hour": 1000.0, "day": 5.0}),
]


@pytest.mark.parametrize(("field", "value"), TAMPERED, ids=[f"{f}={v!r}" for f, v in TAMPERED])
def test_every_field_tampered_is_refused(field: str, value: Any) -> None:
    version, key_id, fields, signature = parts(mint(a_grant(), "k1", KEYS["k1"]))
    if field.startswith("lim."):
        fields["lim"][field[4:]] = value
    else:
        fields[field] = value
    with pytest.raises(GrantRefused, match="bad signature"):
        verify(f"{version}.{key_id}.{encode(fields)}.{signature}", KEYS, audience=AUD, now=NOW)


def test_the_key_id_and_the_version_are_signed_too() -> None:
    token = mint(a_grant(), "k1", KEYS["k1"])
    version, _, payload, signature = token.split(".")
    with pytest.raises(GrantRefused, match="bad signature"):
        verify(f"{version}.k2.{payload}.{signature}", KEYS, audience=AUD, now=NOW)
    with pytest.raises(GrantRefused, match="unknown version"):
        verify(f"sg2.k1.{payload}.{signature}", KEYS, audience=AUD, now=NOW)


@pytest.mark.parametrize("position", [0, 10, 20, 30, 41])
def test_a_signature_changed_anywhere_is_refused(position: int) -> None:
    token = mint(a_grant(), "k1", KEYS["k1"])
    head, signature = token.rsplit(".", 1)
    flipped = signature[:position] + ("A" if signature[position] != "A" else "B") + signature[position + 1:]
    with pytest.raises(GrantRefused):
        verify(f"{head}.{flipped}", KEYS, audience=AUD, now=NOW)


def test_a_signature_spelt_with_other_trailing_bits_is_refused() -> None:
    # 32 bytes are 43 base64 characters whose last carries two unused bits: another spelling of the same bytes.
    token = mint(a_grant(), "k1", KEYS["k1"])
    head, signature = token.rsplit(".", 1)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = alphabet.index(signature[-1])
    other = alphabet[last ^ 1]
    with pytest.raises(GrantRefused, match="malformed signature"):
        verify(f"{head}.{signature[:-1]}{other}", KEYS, audience=AUD, now=NOW)


def test_a_grant_signed_with_a_key_we_do_not_hold_is_refused() -> None:
    _, _, fields, _ = parts(mint(a_grant(), "k1", KEYS["k1"]))
    with pytest.raises(GrantRefused, match="bad signature"):
        verify(signed("sg1", "k1", fields, "a-guess-" + "z" * 40), KEYS, audience=AUD, now=NOW)


@pytest.mark.parametrize("token", [
    "", "sg1", "sg1.k1", "sg1.k1.e30", "a.b.c.d", "sg1.k1.e30.!!!!", "sg1.k1.e30.AAAA=", "sg1.k1.e30.AAAA.x",
    "sg1.nokey.e30.AAAA", "x" * 5000,
], ids=lambda t: t[:20] or "empty")
def test_malformed_tokens_are_refused(token: str) -> None:
    with pytest.raises(GrantRefused):
        verify(token, KEYS, audience=AUD, now=NOW)


def test_a_payload_of_the_wrong_shape_under_a_good_signature_is_refused() -> None:
    # Only someone holding a key could do this (a leaked key, a version that changed): the second line holds.
    _, _, fields, _ = parts(mint(a_grant(), "k1", KEYS["k1"]))
    for broken in ({**fields, "extra": 1}, {**fields, "lim": {**fields["lim"], "steps": True}},
                   {**fields, "lim": {**fields["lim"], "per": {"fortnight": 1.0}}}, {**fields, "bot": "../etc"},
                   {**fields, "sub": "alice"}):
        with pytest.raises(GrantRefused, match="payload"):
            verify(signed("sg1", "k1", broken, KEYS["k1"]), KEYS, audience=AUD, now=NOW)


def test_a_grant_that_would_live_past_thirty_minutes_is_refused_even_when_signed() -> None:
    _, _, fields, _ = parts(mint(a_grant(), "k1", KEYS["k1"]))
    fields["exp"] = fields["iat"] + 31 * 60
    with pytest.raises(GrantRefused, match="longer than 30 minutes"):
        verify(signed("sg1", "k1", fields, KEYS["k1"]), KEYS, audience=AUD, now=NOW)


def test_a_grant_is_never_minted_for_more_than_thirty_minutes() -> None:
    with pytest.raises(ValueError, match="at most 30 minutes"):
        a_grant(minutes=31)
    assert a_grant(minutes=30).expires_at - NOW == timedelta(minutes=30)


@pytest.mark.parametrize(("after", "good"), [
    (timedelta(0), True), (timedelta(minutes=14, seconds=59), True), (timedelta(minutes=15), False),
    (timedelta(hours=3), False), (-timedelta(seconds=30), True), (-timedelta(minutes=5), False),
])
def test_expiry(after: timedelta, good: bool) -> None:
    # Dead at its expiry; a verifier whose clock is a little behind the minter's still takes it, a lot does not.
    token = mint(a_grant(), "k1", KEYS["k1"])
    if good:
        assert verify(token, KEYS, audience=AUD, now=NOW + after).bot == "helper"
    else:
        with pytest.raises(GrantRefused, match=r"expired|future"):
            verify(token, KEYS, audience=AUD, now=NOW + after)


def test_another_audience_is_refused() -> None:
    token = mint(a_grant(audience="summon-door:elsewhere.org"), "k1", KEYS["k1"])
    with pytest.raises(GrantRefused, match="another audience"):
        verify(token, KEYS, audience=AUD, now=NOW)


def test_key_rotation() -> None:
    old = mint(a_grant(), "k1", KEYS["k1"])
    new = mint(a_grant(), "k2", KEYS["k2"])
    # Both keys verify while the old one's grants may still be alive…
    assert verify(old, KEYS, audience=AUD, now=NOW).id != verify(new, KEYS, audience=AUD, now=NOW).id
    # …and once the old key is removed, its grants are refused like any other.
    only_new = {"k2": KEYS["k2"]}
    assert verify(new, only_new, audience=AUD, now=NOW).bot == "helper"
    with pytest.raises(GrantRefused, match="unknown key id"):
        verify(old, only_new, audience=AUD, now=NOW)


def test_the_signature_is_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    compared: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(grants.hmac, "compare_digest", spy)
    token = mint(a_grant(), "k1", KEYS["k1"])
    verify(token, KEYS, audience=AUD, now=NOW)
    head, signature = token.rsplit(".", 1)
    with pytest.raises(GrantRefused):
        verify(f"{head}.{signature[:-2]}AA", KEYS, audience=AUD, now=NOW)
    assert len(compared) == 2 and all(len(a) == len(b) == 32 for a, b in compared)


@pytest.mark.parametrize(("key_id", "key"), [("k 1", KEYS["k1"]), ("k1", "short")])
def test_a_bad_key_is_the_minters_mistake(key_id: str, key: str) -> None:
    with pytest.raises(ValueError):
        mint(a_grant(), key_id, key)


@pytest.mark.parametrize(("field", "value", "said"), [
    ("person", "alice", "@name:server"), ("room", "#alias:example.org", "by its id"), ("bot", "Not A Slug", "slug"),
])
def test_a_grant_for_something_no_grant_names_is_not_minted(field: str, value: str, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        a_grant(**{field: value})
