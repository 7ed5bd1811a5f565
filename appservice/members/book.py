"""The charters, kept sealed (SPEC §10): the one place a charter is sealed into the store or unsealed out of
it, and where who-may-do-what is enforced (the rules are ``appservice.members.charter``'s).

A charter that does not unseal or no longer reads fails closed for that charter alone: ``read`` raises
``CharterUnreadable`` for it, ``owned_by`` leaves it out (logged), and the others carry on.
"""

from __future__ import annotations

import base64
import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from appservice.members.charter import (
    Charter,
    CharterRules,
    may_make_for,
    may_overwrite,
    may_remove,
    read_charter,
)
from appservice.members.errors import CharterRefused, CharterUnreadable
from appservice.members.seal import Keyring
from appservice.members.tables import MemberTables, SealedCharter
from engine.store import Families, Store

log = logging.getLogger(__name__)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Kept:
    """A charter unsealed, with what the table keeps beside it."""

    id: str
    charter: Charter
    failures: int
    created_at: datetime
    updated_at: datetime


def new_charter_id() -> str:
    return "mb_" + secrets.token_urlsafe(12)


class Book:
    def __init__(self, keyring: Keyring, rules: CharterRules | None = None) -> None:
        self.keyring = keyring
        # Stored charters are read without the floor: a floor raised later does not lock a bot out of its room.
        self.rules = rules or CharterRules()
        self._stored = CharterRules(floor_seconds=0, loopback_for_tests=self.rules.loopback_for_tests)

    def _seal(self, charter_id: str, charter: Charter) -> tuple[str, bytes, int]:
        plain = charter.sealable()
        key_id, sealed = self.keyring.seal(charter_id, plain)
        return key_id, sealed, len(plain)

    def unseal(self, row: SealedCharter) -> Kept:
        """The charter in ``row``; raises ``CharterUnreadable``."""
        plain = self.keyring.unseal(row.id, row.key_id, row.sealed)
        try:
            charter = read_charter(plain, self._stored)
        except ValueError as exc:
            raise CharterUnreadable(f"charter {row.id} opens but is not a charter: {exc}") from None
        if (charter.owner, charter.author) != (row.owner, row.author):
            raise CharterUnreadable(f"charter {row.id} names another owner or author than its row")
        return Kept(row.id, charter, row.failures, row.created_at, row.updated_at)

    def seal_pending(self, charter: Charter) -> tuple[str, dict[str, Any]]:
        """A charter not yet stored (its dry run is still to be judged), sealed for the dry run's context: the
        id it will be stored under, and the sealed form (no plaintext of it rides on the run)."""
        charter_id = new_charter_id()
        key_id, sealed, size = self._seal(charter_id, charter)
        return charter_id, {"key_id": key_id, "sealed": base64.b64encode(sealed).decode(), "size": size,
                            "owner": charter.owner, "author": charter.author}

    def open_pending(self, charter_id: str, pending: Mapping[str, Any]) -> Kept:
        """A dry run's pending charter; raises ``CharterUnreadable``."""
        try:
            row = SealedCharter(charter_id, str(pending["author"]), str(pending["owner"]), str(pending["key_id"]),
                                base64.b64decode(str(pending["sealed"])), int(pending["size"]), 0, _EPOCH, _EPOCH)
        except (KeyError, ValueError, TypeError) as exc:
            raise CharterUnreadable(f"charter {charter_id}: its dry run carries no readable charter ({exc})") from None
        return self.unseal(row)

    async def create(self, db: Families, charter: Charter, *, by: str, clock_at: datetime, host: str,
                     charter_id: str | None = None) -> str:
        """Store a new charter (with its clock on ``host``, started at ``clock_at``); its id (``charter_id``: the
        one its dry run ran under). Raises ``CharterRefused`` when ``by`` makes it for somebody else."""
        if not may_make_for(by, charter.owner) or charter.author != by:
            raise CharterRefused("a bot is made for the person who asks for it; I cannot make one for somebody else")
        charter_id = charter_id or new_charter_id()
        key_id, sealed, size = self._seal(charter_id, charter)
        await db.of(MemberTables).insert(charter_id, author=charter.author, owner=charter.owner, key_id=key_id,
                                sealed=sealed, size=size, clock_at=clock_at, host=host)
        log.info("member bot %s stored (%d bytes sealed under %s)", charter_id, size, key_id,
                 extra={"charter": charter_id})
        return charter_id

    async def read(self, db: Families, charter_id: str) -> Kept | None:
        """The charter, or None when there is none; raises ``CharterUnreadable`` for one that will not open."""
        row = await db.of(MemberTables).get(charter_id)
        return None if row is None else self.unseal(row)

    async def owned_by(self, db: Families, owner: str) -> list[Kept]:
        """The charters ``owner`` owns that open; one that does not is logged and left out."""
        kept: list[Kept] = []
        for row in await db.of(MemberTables).owned_by(owner):
            try:
                kept.append(self.unseal(row))
            except CharterUnreadable as exc:
                log.error("member bot left out: %s", exc, extra={"charter": row.id})
        return kept

    async def overwrite(self, db: Families, charter_id: str, charter: Charter, *, by: str) -> Kept:
        """Replace a charter (author or owner only); its author and owner stay as they were. Raises
        ``CharterRefused`` (not theirs, or none) — checked on the row, so an unreadable charter can still be
        refused but is never overwritten blind."""
        row = await db.of(MemberTables).lock(charter_id)
        if row is None:
            raise CharterRefused(f"there is no bot {charter_id}")
        if not may_overwrite(author=row.author, owner=row.owner, by=by):
            raise CharterRefused("that bot is not yours to change")
        charter = charter.model_copy(update={"owner": row.owner, "author": row.author})
        key_id, sealed, size = self._seal(charter_id, charter)
        await db.of(MemberTables).reseal(charter_id, key_id=key_id, sealed=sealed, size=size)
        return Kept(charter_id, charter, row.failures, row.created_at, row.updated_at)

    async def remove(self, db: Families, charter_id: str, *, by: str, admin: bool = False) -> bool:
        """Remove a charter and its clock (author, owner, or a server admin); False when there was none. Raises
        ``CharterRefused``. Works on an unreadable charter too: removing needs no plaintext."""
        row = await db.of(MemberTables).lock(charter_id)
        if row is None:
            return False
        if not may_remove(author=row.author, owner=row.owner, by=by, admin=admin):
            raise CharterRefused("that bot is not yours to remove")
        gone = await db.of(MemberTables).delete(charter_id)
        log.info("member bot %s removed by %s", charter_id, "an admin" if admin and by not in (row.author, row.owner)
                 else "its owner or author", extra={"charter": charter_id})
        return gone

    async def rotate(self, store: Store) -> tuple[int, list[str]]:
        """Re-seal every charter not under the current key (``summon keys rotate``): (how many were re-sealed,
        the ids that would not open — left as they are, for the operator)."""
        done = 0
        stuck: list[str] = []
        for charter_id in await store.of(MemberTables).not_under(self.keyring.current):
            async with store.transaction("reseal_charter") as tx:
                row = await tx.of(MemberTables).lock(charter_id)
                if row is None or row.key_id == self.keyring.current:
                    continue
                try:
                    plain = self.keyring.unseal(row.id, row.key_id, row.sealed)
                except CharterUnreadable as exc:
                    log.error("cannot re-seal: %s", exc, extra={"charter": charter_id})
                    stuck.append(charter_id)
                    continue
                key_id, sealed = self.keyring.seal(row.id, plain)
                await tx.of(MemberTables).reseal(row.id, key_id=key_id, sealed=sealed, size=len(plain))
                done += 1
        return done, stuck
