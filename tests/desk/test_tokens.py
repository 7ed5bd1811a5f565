"""Who may call the desk: a contact's signed token (forged, expired, of another inbox → 401), another
contact's conversation (404, as if it did not exist), a signed-in contact only with the site's signature, the
staff's key per inbox, and bodies capped while they stream in."""

from __future__ import annotations

import time

import aiohttp
import pytest

from appservice.desk import tokens
from tests.desk.conftest import SECRET, STAFF_KEY, DeskRig

pytestmark = pytest.mark.db


def test_a_token_is_checked_whole_in_constant_time() -> None:
    now = int(time.time())
    good = tokens.mint(SECRET, 1, 7, now, now + 60)
    assert tokens.verify([SECRET], good, time.time()) == tokens.ContactToken(1, 7, now, now + 60)
    kid = tokens.kid(SECRET)
    forged_field = good.replace(f"v2.{kid}.1.7.", f"v2.{kid}.1.8.", 1)
    forged_since = good.replace(f".{now}.", f".{now + 1}.", 1)
    forged_mac = good[:-1] + ("0" if good[-1] != "0" else "1")
    other_secret = tokens.mint(SECRET + "x", 1, 7, now, now + 60)
    expired = tokens.mint(SECRET, 1, 7, now - 10, now - 1)
    for bad in (forged_field, forged_since, forged_mac, other_secret, expired, "", "v2.1.7", good + "0",
                "v1" + good[2:]):
        assert tokens.verify([SECRET], bad, time.time()) is None, bad


async def test_forged_expired_and_foreign_tokens_are_401(desk: DeskRig) -> None:
    ann = await desk.contact("always")
    conversation = await desk.conversation(ann)
    path = f"{desk.base(ann)}/conversations/{conversation}"
    await desk.call("GET", path, token=ann.token)
    now = int(time.time())
    expired = tokens.mint(SECRET, desk.service.desk.inbox("always").row.id, ann.id, now - 9, now - 5)  # type: ignore[union-attr]
    forged = tokens.mint("not-the-desk-secret-" + "y" * 20, desk.service.desk.inbox("always").row.id, ann.id,  # type: ignore[union-attr]
                         now, now + 600)
    for token in (None, "", "garbage", ann.token[:-2] + "00", expired, forged):
        refused = await desk.call("GET", path, token=token, expect=401)
        assert refused == {"error": "a valid contact token is needed"}
    # A good token from another inbox does not hold here either.
    elsewhere = await desk.contact("plain")
    await desk.call("GET", f"/public/api/v1/inboxes/always/contacts/{elsewhere.source_id}", token=elsewhere.token,
                    expect=401)


async def test_another_contacts_conversation_is_404_as_if_it_did_not_exist(desk: DeskRig) -> None:
    ann, bob = await desk.contact("always"), await desk.contact("always")
    hers = await desk.conversation(ann)
    # Bob's own token, Ann's conversation: 404, the same answer as a conversation that does not exist.
    crossed = await desk.call("GET", f"{desk.base(bob)}/conversations/{hers}", token=bob.token, expect=404)
    missing = await desk.call("GET", f"{desk.base(bob)}/conversations/99999999", token=bob.token, expect=404)
    assert crossed == missing == {"error": "no such conversation"}
    await desk.say(bob, hers, "let me in", expect=404)
    # Bob's token under Ann's contact id: no such contact (a token names one contact).
    await desk.call("GET", f"{desk.base(ann)}/conversations/{hers}", token=bob.token, expect=404)
    assert [m["content"] for m in await desk.messages(ann, hers)] == []


async def test_a_signed_in_contact_needs_the_sites_signature(desk: DeskRig) -> None:
    refused = await desk.call("POST", "/public/api/v1/inboxes/always/contacts",
                              body={"identifier": "@ann:localhost", "identifier_token": "0" * 64}, expect=401)
    assert "identifier_token" in refused["error"]
    ann = await desk.signed_in("always", "@ann:localhost")
    row = await desk.row("SELECT user_id, hmac_verified, inbox_id FROM desk_contacts WHERE id = $1", ann.id)
    assert (row["user_id"], row["hmac_verified"]) == ("@ann:localhost", True)
    guest = await desk.contact("always", name="Guest")
    row = await desk.row("SELECT user_id, hmac_verified FROM desk_contacts WHERE id = $1", guest.id)
    assert (row["user_id"], row["hmac_verified"]) == (None, False)


async def test_the_staff_key_reaches_its_own_inbox_only(desk: DeskRig) -> None:
    ann = await desk.contact("always")
    conversation = await desk.conversation(ann)
    await desk.call("GET", desk.staff_path(conversation), staff=STAFF_KEY)
    await desk.call("GET", desk.staff_path(conversation), staff="wrong-key-" + "w" * 20, expect=401)
    await desk.call("GET", desk.staff_path(conversation), expect=401)
    theirs = await desk.contact("other")
    other_conversation = await desk.conversation(theirs)
    # Our key, the other inbox's conversation: 404.
    await desk.call("GET", desk.staff_path(other_conversation), staff=STAFF_KEY, expect=404)
    await desk.call("GET", "/api/v1/accounts/2/conversations", staff=STAFF_KEY, expect=404)


async def test_bodies_are_capped_while_they_stream_in(desk: DeskRig) -> None:
    ann = await desk.contact("plain")
    conversation = await desk.conversation(ann)
    url = f"{desk.url}{desk.base(ann)}/conversations/{conversation}/messages"

    async def chunks():  # type: ignore[no-untyped-def]  # no Content-Length: the cap holds as it streams
        yield b'{"content": "'
        for _ in range(80):
            yield b"x" * 1024
        yield b'"}'

    async with desk.http.post(url, data=chunks(), headers={"Authorization": f"Bearer {ann.token}",
                                                           "Content-Type": "application/json"}) as resp:
        assert resp.status == 413
        assert "64" in (await resp.json())["error"] or "65536" in (await resp.json())["error"]
    async with desk.http.post(url, data=b"[1, 2]", headers={"Authorization": f"Bearer {ann.token}"}) as resp:
        assert resp.status == 400
    assert await desk.messages(ann, conversation) == []
    # The service still answers after a refused stream.
    await desk.say(ann, conversation, "still here")


async def test_unknown_inbox_is_404(desk: DeskRig) -> None:
    async with aiohttp.ClientSession() as http, http.post(f"{desk.url}/public/api/v1/inboxes/nope/contacts",
                                                          json={}) as resp:
        assert resp.status == 404
