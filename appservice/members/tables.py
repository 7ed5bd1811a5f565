"""Member bots' charters as the table keeps them: sealed, with only their id, author, owner, size and times in
the clear (``sql/queries/members.sql``). Sealing and unsealing is ``appservice.members.book``'s, never here's."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from engine.store.base import Family, maybe, rows


@dataclass(frozen=True, slots=True)
class SealedCharter:
    """One charter's row: ``sealed`` is the nonce and the ciphertext, under key ``key_id``."""

    id: str
    author: str
    owner: str
    key_id: str
    sealed: bytes
    size: int
    failures: int
    created_at: datetime
    updated_at: datetime


class MemberTables(Family):
    __slots__ = ()

    async def insert(self, charter_id: str, *, author: str, owner: str, key_id: str, sealed: bytes, size: int,
                     clock_at: datetime, host: str) -> None:
        """Store a new charter with its clock (on ``host``, the bot that runs member bots) started at
        ``clock_at``: a charter never exists without one."""
        await self._value("insert_member_bot", charter_id, author, owner, key_id, sealed, size, clock_at, host)

    async def get(self, charter_id: str) -> SealedCharter | None:
        return maybe(SealedCharter, await self._one("member_bot", charter_id))

    async def lock(self, charter_id: str) -> SealedCharter | None:
        """The row, locked for the rest of the transaction; None when there is no such charter."""
        return maybe(SealedCharter, await self._one("member_bot_for_update", charter_id))

    async def owned_by(self, owner: str) -> list[SealedCharter]:
        return rows(SealedCharter, await self._all("member_bots_owned_by", owner))

    async def ids(self) -> list[str]:
        return [str(r["id"]) for r in await self._all("member_bot_ids")]

    async def not_under(self, key_id: str) -> list[str]:
        """The charters a rotation to ``key_id`` has still to re-seal."""
        return [str(r["id"]) for r in await self._all("member_bots_not_under", key_id)]

    async def reseal(self, charter_id: str, *, key_id: str, sealed: bytes, size: int, owner: str | None = None) -> None:
        await self._run("reseal_member_bot", charter_id, key_id, sealed, size, owner)

    async def delete(self, charter_id: str) -> bool:
        """Remove a charter and its clock; False when there was none."""
        return await self._value("delete_member_bot", charter_id) is not None

    async def failed(self, charter_id: str) -> int:
        """Count one more failed edition; how many in a row now (0 when the charter is gone)."""
        return int(await self._value("member_bot_failed", charter_id) or 0)

    async def succeeded(self, charter_id: str) -> int:
        """An edition went out: clear the outage; how many failures in a row it ended."""
        return int(await self._value("member_bot_succeeded", charter_id) or 0)

    async def cancel_run(self, run_id: int) -> bool:
        """Ask a member bot's unfinished run to stop (a dry run that took too long)."""
        return await self._value("cancel_member_run", run_id) is not None
