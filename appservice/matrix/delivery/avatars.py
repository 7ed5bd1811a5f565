"""Every one of our users has a face: a bot's ``avatar:`` (an mxc:// uri, taken as it is, or an image file under
content/), else one drawn from its ``glyph:`` or initial (``avatar_art``); the service user's from
``appservice.avatar`` the same way. An image is uploaded once, by the SHA-256 of its bytes (remembered in the
database, so a restart or another process uploads nothing again), and set on the user only when it differs from
the one it has — so a changed file, republished, is what changes a puppet's avatar."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from appservice.matrix.delivery.avatar_art import EMOJI_FONT, draw
from appservice.matrix.delivery.homeserver import Homeserver
from appservice.matrix.errors import MatrixError
from appservice.pictures import MXC
from engine.content import Registry
from engine.content.files import image_type
from engine.errors import StoreError
from engine.store import Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Face:
    """Who, and what their avatar is made from."""

    user_id: str
    name: str
    glyph: str | None
    avatar: str | None  # an mxc:// uri, or an image file relative to the content folder


class Avatars:
    def __init__(self, store: Store, homeserver: Homeserver, registry: Callable[[], Registry], content_dir: Path, *,
                 service: Face, emoji_font: Path = EMOJI_FONT) -> None:
        self.store = store
        self.homeserver = homeserver
        self._registry = registry
        self.content_dir = content_dir
        self.service = service
        self.emoji_font = emoji_font

    def faces(self) -> list[Face]:
        return [self.service, *(Face(b.user_id, b.name, b.glyph, b.avatar) for b in self._registry().bots.values())]

    async def set_all(self) -> int:
        """Give every one of our users its avatar; how many changed. One that fails is logged and the rest go on."""
        changed = 0
        for face in self.faces():
            try:
                mxc = await self.mxc(face)
                changed += await self.homeserver.set_avatar(face.user_id, mxc)
            except (MatrixError, StoreError, OSError, ValueError) as exc:
                log.error("could not give %s its avatar: %s", face.user_id, exc)
        if changed:
            log.info("%d avatar(s) set", changed)
        return changed

    async def mxc(self, face: Face) -> str:
        """Where ``face``'s avatar is on the homeserver, uploading its image the first time it is seen."""
        if face.avatar is not None and MXC.hold(face.avatar):
            return face.avatar
        if face.avatar is not None:
            data = await asyncio.to_thread((self.content_dir / face.avatar).read_bytes)
            kind, filename = image_type(data), Path(face.avatar).name
            if kind is None:
                raise ValueError(f"{face.avatar} is not a PNG, JPEG, GIF or WebP image")
        else:
            data = await asyncio.to_thread(draw, face.name, face.glyph, emoji_font=self.emoji_font)
            kind, filename = "image/png", f"{face.user_id.lstrip('@').split(':')[0]}.png"
        digest = hashlib.sha256(data).hexdigest()
        known = await self.store.profiles.avatar_upload(digest)
        if known is not None:
            return known
        mxc = await self.homeserver.upload(face.user_id, data, kind, filename)
        await self.store.profiles.record_avatar_upload(digest, mxc)
        log.info("uploaded %s's avatar (%d bytes) as %s", face.user_id, len(data), mxc)
        return mxc
