"""The appservice endpoint: the homeserver's token checked every way it can come (401 for none, 403 for a
bad one), the handler called only for an authorised, well-formed transaction, a body past the cap refused
while it streams, and the spec's M_UNRECOGNIZED for a route or a method the service does not have."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, make_mocked_request

from appservice.matrix.inbound.transactions import BadBody, Transaction, TransactionEndpoint, read_transaction

TOKEN = "hs-token-0123456789abcdef"
WRONG = "hs-token-0123456789abcdeX"


class Fakes:
    def __init__(self) -> None:
        self.transactions: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]]]] = []
        self.users_asked: list[str] = []
        self.known_users = {"@bot_helper:localhost"}
        self.new = True

    async def handler(self, txn_id: str, events: list[dict[str, Any]], ephemeral: list[dict[str, Any]]) -> bool:
        self.transactions.append((txn_id, events, ephemeral))
        return self.new

    async def query_user(self, user_id: str) -> bool:
        self.users_asked.append(user_id)
        return user_id in self.known_users


def endpoint(fakes: Fakes | None = None) -> TransactionEndpoint:
    fakes = fakes or Fakes()
    return TransactionEndpoint(TOKEN, fakes.handler, fakes.query_user)


def request(*, bearer: str | None = None, query: str | None = None, header: str | None = None) -> web.Request:
    path = "/_matrix/app/v1/transactions/1" + (f"?access_token={query}" if query is not None else "")
    headers = {}
    if bearer is not None:
        headers["Authorization"] = f"Bearer {bearer}"
    if header is not None:
        headers["Authorization"] = header
    return make_mocked_request("PUT", path, headers=headers)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"bearer": TOKEN}, True),
        ({"bearer": WRONG}, False),
        ({"bearer": ""}, False),
        ({"bearer": TOKEN[:-1]}, False),
        ({"bearer": TOKEN + "x"}, False),
        ({"query": TOKEN}, True),
        ({"query": WRONG}, False),
        ({"query": ""}, False),
        ({"bearer": TOKEN, "query": TOKEN}, True),
        ({"bearer": TOKEN, "query": WRONG}, False),
        ({"bearer": WRONG, "query": TOKEN}, False),
        ({}, False),
        ({"header": f"bearer {TOKEN}"}, True),
        ({"header": f"Basic {TOKEN}"}, False),
        ({"header": TOKEN}, False),
        ({"header": f"Basic {TOKEN}", "query": TOKEN}, True),
    ],
    ids=[
        "bearer_right", "bearer_wrong", "bearer_empty", "bearer_prefix", "bearer_longer",
        "legacy_query_right", "legacy_query_wrong", "legacy_query_empty",
        "both_right", "header_right_query_wrong", "header_wrong_query_right", "none",
        "bearer_lower_case_scheme", "basic_scheme", "no_scheme", "basic_scheme_ignored_query_right",
    ],
)
def test_authorised(kwargs: dict[str, str], expected: bool) -> None:
    assert endpoint().authorised(request(**kwargs)) is expected


ClientMaker = Callable[..., Awaitable[TestClient[web.Request, web.Application]]]


@pytest.fixture
def fakes() -> Fakes:
    return Fakes()


@pytest.fixture
async def client(aiohttp_client: ClientMaker, fakes: Fakes) -> TestClient[web.Request, web.Application]:
    app = web.Application()
    endpoint(fakes).routes(app)
    return await aiohttp_client(app)


GOOD = {"Authorization": f"Bearer {TOKEN}"}
BAD = {"Authorization": f"Bearer {WRONG}"}
EVENTS = [{"type": "m.room.message", "event_id": "$1", "content": {"body": "hi"}}]
EPHEMERAL = [{"type": "m.typing", "content": {"user_ids": []}}]


async def test_a_bad_token_is_forbidden_and_stores_nothing(client: TestClient[Any, Any], fakes: Fakes) -> None:
    response = await client.put("/_matrix/app/v1/transactions/t1", json={"events": EVENTS}, headers=BAD)
    assert response.status == 403
    assert (await response.json())["errcode"] == "M_FORBIDDEN"
    assert fakes.transactions == []


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer "}, {"Authorization": f"Basic {TOKEN}"}],
                         ids=["no_header", "empty_bearer", "another_scheme"])
async def test_no_token_is_unauthorised(client: TestClient[Any, Any], fakes: Fakes, headers: dict[str, str]) -> None:
    # The spec: a missing token is 401 M_UNAUTHORIZED, a wrong one 403 M_FORBIDDEN.
    for method, path in [("PUT", "/_matrix/app/v1/transactions/t1"), ("GET", "/_matrix/app/v1/users/@x:hs"),
                         ("GET", "/_matrix/app/v1/rooms/%23r:hs"), ("POST", "/_matrix/app/v1/ping"),
                         ("PUT", "/transactions/t1")]:
        response = await client.request(method, path, json={"events": EVENTS}, headers=headers)
        assert response.status == 401, path
        assert (await response.json())["errcode"] == "M_UNAUTHORIZED"
    assert fakes.transactions == [] and fakes.users_asked == []


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/_matrix/app/v1/thirdparty/protocol/irc"), ("PUT", "/_matrix/app/v1/nothing"),
     ("GET", "/_matrix/app/v2/transactions/t1"), ("GET", "/_matrix/app"), ("POST", "/_matrix/app/unstable/x"),
     ("PUT", "/_matrix/app/v1/transactions/t1/more")],
)
async def test_an_unknown_route_is_404_unrecognised(client: TestClient[Any, Any], method: str, path: str) -> None:
    response = await client.request(method, path, headers=GOOD)
    assert response.status == 404
    assert (await response.json())["errcode"] == "M_UNRECOGNIZED"


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/_matrix/app/v1/transactions/t1"), ("POST", "/_matrix/app/v1/transactions/t1"),
     ("DELETE", "/_matrix/app/v1/users/@x:hs"), ("PUT", "/_matrix/app/v1/rooms/%23r:hs"),
     ("GET", "/_matrix/app/v1/ping"), ("POST", "/transactions/t1"), ("PUT", "/users/@x:hs")],
)
async def test_a_wrong_method_is_405_unrecognised(client: TestClient[Any, Any], fakes: Fakes, method: str,
                                                   path: str) -> None:
    response = await client.request(method, path, headers=GOOD)
    assert response.status == 405
    assert (await response.json())["errcode"] == "M_UNRECOGNIZED"
    assert fakes.transactions == [] and fakes.users_asked == []


async def test_a_body_past_the_cap_is_refused_while_it_streams(aiohttp_client: ClientMaker, fakes: Fakes) -> None:
    app = web.Application(client_max_size=64 * 1024)  # the listener's cap (appservice.max_body_size)
    endpoint(fakes).routes(app)
    client = await aiohttp_client(app)
    sent_past_cap = asyncio.Event()
    finished = asyncio.Event()

    async def body() -> AsyncIterator[bytes]:
        yield b'{"events": [], "pad": "' + b"x" * (80 * 1024)
        sent_past_cap.set()
        try:  # stalls: a reader that waits for the whole body never answers
            await asyncio.wait_for(asyncio.Event().wait(), 10)
        except TimeoutError:
            pass
        finished.set()
        yield b'"}'

    response = await asyncio.wait_for(
        client.put("/_matrix/app/v1/transactions/big", data=body(), headers={**GOOD, "Content-Type": "application/json"}),
        20,
    )
    assert response.status == 413
    assert (await response.json())["errcode"] == "M_TOO_LARGE"
    assert sent_past_cap.is_set() and not finished.is_set()
    declared = await client.put("/_matrix/app/v1/transactions/big2", data=b"x" * (65 * 1024), headers=GOOD)
    assert declared.status == 413 and (await declared.json())["errcode"] == "M_TOO_LARGE"
    assert fakes.transactions == []


async def test_a_good_transaction_is_handed_over_and_acknowledged(
    client: TestClient[Any, Any], fakes: Fakes,
) -> None:
    body = {"events": EVENTS, "ephemeral": EPHEMERAL}
    response = await client.put("/_matrix/app/v1/transactions/t1", json=body, headers=GOOD)
    assert response.status == 200
    assert await response.json() == {}
    assert fakes.transactions == [("t1", EVENTS, EPHEMERAL)]


async def test_the_legacy_path_and_query_token_work(client: TestClient[Any, Any], fakes: Fakes) -> None:
    response = await client.put(f"/transactions/t2?access_token={TOKEN}", json={"events": EVENTS})
    assert response.status == 200
    assert fakes.transactions == [("t2", EVENTS, [])]


async def test_a_replay_is_still_acknowledged(client: TestClient[Any, Any], fakes: Fakes) -> None:
    fakes.new = False
    response = await client.put("/_matrix/app/v1/transactions/t1", json={"events": EVENTS}, headers=GOOD)
    assert response.status == 200
    assert await response.json() == {}
    assert len(fakes.transactions) == 1


async def test_msc2409_ephemeral_is_read(client: TestClient[Any, Any], fakes: Fakes) -> None:
    body = {"events": [], "de.sorunome.msc2409.ephemeral": EPHEMERAL}
    response = await client.put("/_matrix/app/v1/transactions/t3", json=body, headers=GOOD)
    assert response.status == 200
    assert fakes.transactions == [("t3", [], EPHEMERAL)]


async def test_events_that_are_not_objects_are_dropped(client: TestClient[Any, Any], fakes: Fakes) -> None:
    body = {"events": [EVENTS[0], "junk", 3, None], "ephemeral": ["junk", EPHEMERAL[0]]}
    response = await client.put("/_matrix/app/v1/transactions/t4", json=body, headers=GOOD)
    assert response.status == 200
    assert fakes.transactions == [("t4", EVENTS, EPHEMERAL)]


async def test_a_body_that_is_not_json_is_refused(client: TestClient[Any, Any], fakes: Fakes) -> None:
    response = await client.put(
        "/_matrix/app/v1/transactions/t1", data=b"{not json", headers={**GOOD, "Content-Type": "application/json"},
    )
    assert response.status == 400
    assert (await response.json())["errcode"] == "M_NOT_JSON"
    assert fakes.transactions == []


@pytest.mark.parametrize(
    "body",
    [[], {"events": {"not": "a list"}}, {"events": [], "ephemeral": "x"}],
    ids=["a_list", "events_not_a_list", "ephemeral_not_a_list"],
)
async def test_json_of_the_wrong_shape_is_refused(
    client: TestClient[Any, Any], fakes: Fakes, body: Any,
) -> None:
    response = await client.put("/_matrix/app/v1/transactions/t1", json=body, headers=GOOD)
    assert response.status == 400
    assert (await response.json())["errcode"] == "M_BAD_JSON"
    assert fakes.transactions == []


async def test_ping(client: TestClient[Any, Any]) -> None:
    response = await client.post("/_matrix/app/v1/ping", json={}, headers=GOOD)
    assert response.status == 200
    assert await response.json() == {}
    refused = await client.post("/_matrix/app/v1/ping", json={}, headers=BAD)
    assert refused.status == 403


async def test_an_unknown_user_is_not_found(client: TestClient[Any, Any], fakes: Fakes) -> None:
    response = await client.get("/_matrix/app/v1/users/@nobody:localhost", headers=GOOD)
    assert response.status == 404
    assert (await response.json())["errcode"] == "M_NOT_FOUND"
    assert fakes.users_asked == ["@nobody:localhost"]


async def test_a_known_user_is_found(client: TestClient[Any, Any], fakes: Fakes) -> None:
    response = await client.get("/_matrix/app/v1/users/@bot_helper:localhost", headers=GOOD)
    assert response.status == 200
    assert await response.json() == {}


async def test_a_user_query_with_a_bad_token_asks_nothing(client: TestClient[Any, Any], fakes: Fakes) -> None:
    response = await client.get("/users/@bot_helper:localhost", headers=BAD)
    assert response.status == 403
    assert fakes.users_asked == []


async def test_room_aliases_are_not_provided(client: TestClient[Any, Any]) -> None:
    response = await client.get("/_matrix/app/v1/rooms/%23room:localhost", headers=GOOD)
    assert response.status == 404
    assert (await response.json())["errcode"] == "M_NOT_FOUND"
    refused = await client.get("/_matrix/app/v1/rooms/%23room:localhost", headers=BAD)
    assert refused.status == 403


async def test_a_body_that_is_not_utf8_is_refused(client: TestClient[Any, Any], fakes: Fakes) -> None:
    response = await client.put(
        "/_matrix/app/v1/transactions/t1", data=b'{"events": ["\xff\xfe"]}',
        headers={**GOOD, "Content-Type": "application/json; charset=utf-8"},
    )
    assert response.status == 400
    assert (await response.json())["errcode"] == "M_NOT_JSON"
    assert fakes.transactions == []


# --- the body, read (pure) --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "errcode"),
    [
        (b"{not json", "M_NOT_JSON"),
        (b"\xff\xfe{}", "M_NOT_JSON"),
        (b'{"events": [NaN]}', "M_NOT_JSON"),
        (b'{"events": [], "x": Infinity}', "M_NOT_JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "M_NOT_JSON"),
        (b'{"events": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "M_NOT_JSON"),
        (b'{"n": ' + b"1" * 5000 + b"}", "M_NOT_JSON"),
        (b"", "M_NOT_JSON"),
        (b"[]", "M_BAD_JSON"),
        (b"null", "M_BAD_JSON"),
        (b'{"events": {}}', "M_BAD_JSON"),
        (b'{"events": [], "ephemeral": 3}', "M_BAD_JSON"),
    ],
    ids=["broken", "not_utf8", "nan", "infinity", "nested_deep", "events_nested_deep", "huge_number", "empty",
         "a_list", "null", "events_an_object", "ephemeral_a_number"],
)
def test_a_body_that_is_no_transaction_says_why(body: bytes, errcode: str) -> None:
    read = read_transaction(body)
    assert isinstance(read, BadBody) and read.errcode == errcode
    assert read.message.startswith(("the body", "events and ephemeral"))


def test_a_transaction_body_is_read() -> None:
    body = json.dumps({"events": [*EVENTS, "junk"], "de.sorunome.msc2409.ephemeral": EPHEMERAL}).encode()
    assert read_transaction(body) == Transaction(EVENTS, EPHEMERAL)
    assert read_transaction(b"{}") == Transaction([], [])
