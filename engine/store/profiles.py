"""How our users are named and look: the deployment's puppet prefix, and avatars uploaded once by content hash
(``sql/queries/profiles.sql``)."""

from __future__ import annotations

from engine.errors import StoreError
from engine.store.base import Family


class Profiles(Family):
    __slots__ = ()

    async def puppet_prefix(self, configured: str) -> str:
        """The puppet prefix this deployment has: the one remembered, else ``configured`` (remembered now)."""
        prefix = await self._value("remember_puppet_prefix", configured)
        if prefix is None:
            # Another process recorded one while this statement ran: its insert waited for that commit and did
            # nothing, and its read was of the snapshot from before. A second statement reads the row.
            prefix = await self._value("remember_puppet_prefix", configured)
        if prefix is None:
            raise StoreError("the deployment's puppet prefix could not be read or recorded")
        return str(prefix)

    async def avatar_upload(self, sha256: str) -> str | None:
        """The mxc uri the image with this SHA-256 was uploaded as, or None."""
        mxc = await self._value("avatar_upload", sha256)
        return None if mxc is None else str(mxc)

    async def record_avatar_upload(self, sha256: str, mxc: str) -> None:
        await self._run("record_avatar_upload", sha256, mxc)
