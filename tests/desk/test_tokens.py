"""Who may call the desk: a contact's signed token (forged, expired, of another inbox → 401), another
contact's conversation (404, as if it did not exist), a signed-in contact only with the site's signature, the
staff's key per inbox, and bodies capped while they stream in."""

from __future__ import annotations

import time

import aiohttp
import pytest

from appservice.desk import tokens
from tests.desk.conftest import IDENTITY, SECRET, STAFF_KEY, DeskRig, inboxes

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


# --- the site's word for who a contact is: signed with its inbox and an expiry (issue 24 item 8) ------------


def _claim(account: str, **signature: str) -> dict[str, str]:
    return {"identifier": account, **signature}


async def test_a_captured_identifier_hash_no_longer_signs_in(desk: DeskRig) -> None:
    contacts = "/public/api/v1/inboxes/always/contacts"
    static = tokens.identity_hash(IDENTITY, "@ann:localhost")
    refused = await desk.call("POST", contacts, body=_claim("@ann:localhost", identifier_hash=static), expect=401)
    assert "identifier_token" in refused["error"]
    now = int(time.time())
    for bad in (tokens.identity_token(IDENTITY, "always", "@ann:localhost", now - 1),  # expired
                tokens.identity_token(IDENTITY, "other", "@ann:localhost", now + 600),  # another inbox's
                tokens.identity_token(IDENTITY, "always", "@bob:localhost", now + 600),  # another account's
                tokens.identity_token(IDENTITY, "always", "@ann:localhost", now + 2 * 86_400),  # good for too long
                tokens.identity_token("another-identity-secret-x", "always", "@ann:localhost", now + 600)):
        await desk.call("POST", contacts, body=_claim("@ann:localhost", identifier_token=bad), expect=401)
    assert (await desk.row("SELECT count(*) AS n FROM desk_contacts WHERE user_id IS NOT NULL"))["n"] == 0
    good = tokens.identity_token(IDENTITY, "always", "@ann:localhost", now + 600)
    made = await desk.call("POST", contacts, body=_claim("@ann:localhost", identifier_token=good))
    assert made["hmac_verified"] is True


@pytest.mark.desk_config(inboxes={name: inbox.model_copy(update={"identity_static_hash": True})
                                  for name, inbox in inboxes().items()})
async def test_the_static_hash_holds_only_behind_its_compatibility_setting(desk: DeskRig) -> None:
    static = tokens.identity_hash(IDENTITY, "@ann:localhost")
    made = await desk.call("POST", "/public/api/v1/inboxes/always/contacts",
                           body=_claim("@ann:localhost", identifier_hash=static))
    assert made["hmac_verified"] is True
    await desk.call("POST", "/public/api/v1/inboxes/always/contacts",
                    body=_claim("@ann:localhost", identifier_hash="0" * 64), expect=401)


# --- contact tokens: a key id, a chain no renewal extends for ever, revocation -----------------------------


def _inbox_id(desk: DeskRig, name: str) -> int:
    inbox = desk.service.desk.inbox(name)
    assert inbox is not None
    return inbox.row.id


@pytest.mark.desk_config(token_days=30, token_max_days=60)
async def test_renewal_keeps_the_chains_start_and_ends_at_token_max_days(desk: DeskRig) -> None:
    ann = await desk.contact("always")
    now = int(time.time())
    assert ann.token.startswith(f"v2.{tokens.kid(SECRET)}.")
    # A chain begun 59 days ago: renewal gives a token to its 60th day, not thirty days on.
    old = tokens.mint(SECRET, _inbox_id(desk, "always"), ann.id, now - 59 * 86_400, now + 3_600)
    renewed = await desk.call("POST", f"{desk.base(ann)}/token", token=old)
    assert renewed["token_expires_at"] == now - 59 * 86_400 + 60 * 86_400
    assert tokens.verify([SECRET], renewed["pubsub_token"], now).since == now - 59 * 86_400  # type: ignore[union-attr]
    # A chain past its 60 days is refused, whatever its own expiry says (a token made before the limit shrank).
    past = tokens.mint(SECRET, _inbox_id(desk, "always"), ann.id, now - 61 * 86_400, now + 3_600)
    await desk.call("POST", f"{desk.base(ann)}/token", token=past, expect=401)
    await desk.call("GET", desk.base(ann), token=past, expect=401)


@pytest.mark.desk_config(secret="the-new-desk-secret-" + "n" * 20, old_secrets=[SECRET])
async def test_a_rotated_secret_still_verifies_the_tokens_it_signed(desk: DeskRig) -> None:
    ann = await desk.contact("always")
    assert ann.token.startswith(f"v2.{tokens.kid('the-new-desk-secret-' + 'n' * 20)}.")
    now = int(time.time())
    signed_before = tokens.mint(SECRET, _inbox_id(desk, "always"), ann.id, now, now + 600)
    await desk.call("GET", desk.base(ann), token=signed_before)
    renewed = await desk.call("POST", f"{desk.base(ann)}/token", token=signed_before)
    assert renewed["pubsub_token"].startswith(f"v2.{tokens.kid('the-new-desk-secret-' + 'n' * 20)}.")
    unknown = tokens.mint("a-secret-never-configured-" + "u" * 10, _inbox_id(desk, "always"), ann.id, now, now + 600)
    await desk.call("GET", desk.base(ann), token=unknown, expect=401)


async def test_revoked_tokens_are_refused_and_renew_nothing(desk: DeskRig) -> None:
    ann, bob = await desk.contact("always"), await desk.contact("always")
    conversation = await desk.conversation(ann)
    revoke = f"/api/v1/accounts/1/contacts/{ann.id}/revoke_tokens"
    await desk.call("POST", revoke, expect=401)
    theirs = await desk.contact("other")
    await desk.call("POST", f"/api/v1/accounts/1/contacts/{theirs.id}/revoke_tokens", staff=STAFF_KEY, expect=404)
    await desk.call("POST", "/api/v1/accounts/1/contacts/" + "9" * 40 + "/revoke_tokens", staff=STAFF_KEY, expect=404)
    renewed = await desk.call("POST", f"{desk.base(ann)}/token", token=ann.token)
    done = await desk.call("POST", revoke, staff=STAFF_KEY)
    assert done["payload"] == {"success": True, "contact_id": ann.id}
    for token in (ann.token, renewed["pubsub_token"]):
        await desk.call("GET", f"{desk.base(ann)}/conversations/{conversation}", token=token, expect=401)
        await desk.call("POST", f"{desk.base(ann)}/token", token=token, expect=401)
    await desk.call("GET", desk.base(bob), token=bob.token)  # another contact's tokens hold


async def test_after_takes_a_message_id_or_is_refused_clearly(desk: DeskRig) -> None:
    ann = await desk.contact("plain")
    conversation = await desk.conversation(ann)
    await desk.say(ann, conversation, "first")
    path = f"{desk.base(ann)}/conversations/{conversation}/messages"
    assert [m["content"] for m in await desk.call("GET", path + "?after=0", token=ann.token)] == ["first"]
    for after in ("9" * 40, "-1", "١٢", "1e3", "", "0x10"):
        refused = await desk.call("GET", f"{path}?after={after}", token=ann.token, expect=422)
        assert refused == {"error": "after is a message id (at most 18 digits)"}
    assert await desk.call("GET", f"{path}?after={'9' * 18}", token=ann.token) == []


async def test_text_postgres_cannot_hold_and_json_nested_past_the_parser_are_refused(desk: DeskRig) -> None:
    """Found by the desk's fuzz: a NUL or a lone surrogate in a field, and JSON nested thousands deep, were 500."""
    contacts = "/public/api/v1/inboxes/plain/contacts"
    for name in ("a\x00b", "\ud800"):
        refused = await desk.call("POST", contacts, body={"name": name}, expect=422)
        assert refused == {"error": "name is text without NUL or lone surrogate characters"}
    async with desk.http.post(desk.url + contacts, data=b'{"name": ' + b"[" * 5_000 + b"}") as resp:
        assert (resp.status, await resp.json()) == (400, {"error": "the body is not JSON"})
    assert (await desk.row("SELECT count(*) AS n FROM desk_contacts"))["n"] == 0
