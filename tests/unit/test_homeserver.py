"""The homeserver adapter: a room id is used as written (never looked up), and what mautrix raises comes
back as the error tree's ``MatrixError`` with the homeserver's status and errcode."""

from __future__ import annotations

from typing import Any

import pytest
from mautrix.errors import MForbidden, MNotFound

from appservice.matrix.delivery.homeserver import Homeserver
from appservice.matrix.errors import MatrixError


class NoAPI:
    """An api that fails the test if anything reaches it."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"a room id must not be looked up (asked for {name})")


class Refusing:
    """An api whose every intent the homeserver refuses with ``error``."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def bot_intent(self) -> Refusing:
        return self

    def intent(self, user_id: str) -> Refusing:
        return self

    async def resolve_room_alias(self, alias: str) -> Any:
        raise self.error

    async def leave_room(self, room_id: str, reason: str | None = None) -> None:
        raise self.error


async def test_a_room_id_is_used_as_written() -> None:
    assert await Homeserver(NoAPI()).resolve_alias("!room:hs") == "!room:hs"  # type: ignore[arg-type]


async def test_an_alias_nobody_has_is_none() -> None:
    assert await Homeserver(Refusing(MNotFound(404, "no such alias"))).resolve_alias("#x:hs") is None  # type: ignore[arg-type]


async def test_a_refusal_keeps_the_status_and_the_errcode() -> None:
    with pytest.raises(MatrixError) as raised:
        await Homeserver(Refusing(MForbidden(403, "not invited"))).leave("@bot_x:hs", "!r:hs")  # type: ignore[arg-type]
    assert (raised.value.status, raised.value.errcode) == (403, "M_FORBIDDEN")
    assert not raised.value.retryable


async def test_an_unreachable_homeserver_is_retryable() -> None:
    with pytest.raises(MatrixError) as raised:
        await Homeserver(Refusing(OSError("connection refused"))).leave("@bot_x:hs", "!r:hs")  # type: ignore[arg-type]
    assert raised.value.status is None and raised.value.retryable
