"""Every one of our users has a face: a bot's ``avatar:`` (an mxc:// uri, taken as it is, or an image file under
content/), else one drawn from its ``glyph:`` or initial (``avatar_art``); the service user's from
``appservice.avatar`` the same way. An image is uploaded once, by the SHA-256 of its bytes (remembered in the
database, so a restart or another process uploads nothing again), and set on the user only when it differs from
the one it has — so a changed file, republished, is what changes a puppet's avatar.

A drawn avatar is remembered by what it is drawn from (``recipe``: the art's version, the name, the glyph, the
emoji font), so a face drawn once is not drawn again, by this process or any other. Drawing happens in a child
(``avatar_art``'s ``main``), all of one round's faces in one: Pillow and its fonts stay out of the service, whose
idle memory they were 4-5 MB of."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from appservice.matrix.delivery.avatar_art import ART, EMOJI_FONT
from appservice.matrix.delivery.homeserver import Homeserver
from appservice.matrix.errors import MatrixError
from appservice.pictures import MXC
from engine.content import Registry
from engine.content.files import image_type
from engine.errors import StoreError
from engine.store import Store

log = logging.getLogger(__name__)

DRAW_SECONDS = 60.0  # the child drawing a round's faces; Pillow takes ~30 ms a face
# What this process drew, by recipe (a few KB each): the same faces on another database are not drawn again.
_DRAWN: dict[str, bytes] = {}
_DRAWN_KEPT = 512


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
        faces = self.faces()
        drawn = await self._draw([f for f in faces if f.avatar is None])
        changed = 0
        for face in faces:
            try:
                mxc = await self.mxc(face, drawn)
                changed += await self.homeserver.set_avatar(face.user_id, mxc)
            except (MatrixError, StoreError, OSError, ValueError) as exc:
                log.error("could not give %s its avatar: %s", face.user_id, exc)
        if changed:
            log.info("%d avatar(s) set", changed)
        return changed

    def recipe(self, face: Face) -> str:
        """What a drawn avatar is made from, hashed: equal recipes draw equal bytes."""
        try:
            font = self.emoji_font.stat()
            known_font = f"{self.emoji_font} {font.st_size} {font.st_mtime_ns}"
        except OSError:
            known_font = "none"
        made = json.dumps(["drawn", ART, face.name, face.glyph, known_font])
        return hashlib.sha256(made.encode()).hexdigest()

    async def _draw(self, faces: list[Face]) -> dict[str, bytes | Exception]:
        """The drawn faces' images by recipe, drawing (in one child) only those neither this process nor the
        database has seen; a face the child could not draw holds why."""
        recipes = {self.recipe(f): f for f in faces}
        wanted = {r: f for r, f in recipes.items() if r not in _DRAWN}
        for r in list(wanted):
            try:
                if await self.store.profiles.avatar_upload(r) is not None:
                    del wanted[r]
            except StoreError:
                pass  # asked again face by face, where its failure is logged with the face
        out: dict[str, bytes | Exception] = {r: _DRAWN[r] for r in recipes if r in _DRAWN}
        if not wanted:
            return out
        try:
            images = await draw_apart([(f.name, f.glyph) for f in wanted.values()], self.emoji_font)
        except (OSError, ValueError) as exc:
            return {**out, **{r: exc for r in wanted}}
        for r, data in zip(wanted, images, strict=True):
            out[r] = data
            if len(_DRAWN) >= _DRAWN_KEPT:
                _DRAWN.pop(next(iter(_DRAWN)))
            _DRAWN[r] = data
        return out

    async def mxc(self, face: Face, drawn: dict[str, bytes | Exception] | None = None) -> str:
        """Where ``face``'s avatar is on the homeserver, uploading its image the first time it is seen."""
        if face.avatar is not None and MXC.hold(face.avatar):
            return face.avatar
        recipe = None
        if face.avatar is not None:
            data = await asyncio.to_thread((self.content_dir / face.avatar).read_bytes)
            kind, filename = image_type(data), Path(face.avatar).name
            if kind is None:
                raise ValueError(f"{face.avatar} is not a PNG, JPEG, GIF or WebP image")
        else:
            recipe = self.recipe(face)
            known = await self.store.profiles.avatar_upload(recipe)
            if known is not None:
                return known
            image = (drawn or {}).get(recipe)
            if image is None:
                image = (await self._draw([face]))[recipe]
            if isinstance(image, Exception):
                raise image
            data, kind, filename = image, "image/png", f"{face.user_id.lstrip('@').split(':')[0]}.png"
        digest = hashlib.sha256(data).hexdigest()
        mxc = await self.store.profiles.avatar_upload(digest)
        if mxc is None:
            mxc = await self.homeserver.upload(face.user_id, data, kind, filename)
            await self.store.profiles.record_avatar_upload(digest, mxc)
            log.info("uploaded %s's avatar (%d bytes) as %s", face.user_id, len(data), mxc)
        if recipe is not None:
            await self.store.profiles.record_avatar_upload(recipe, mxc)
        return mxc


async def draw_apart(faces: list[tuple[str, str | None]], emoji_font: Path) -> list[bytes]:
    """Each face drawn by ``avatar_art`` in a child process, in order. Raises ``OSError`` or ``ValueError``
    (with what the child said) when it cannot."""
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "appservice.matrix.delivery.avatar_art", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    asked = json.dumps({"faces": faces, "emoji_font": str(emoji_font)}).encode()
    try:
        out, err = await asyncio.wait_for(child.communicate(asked), DRAW_SECONDS)
    except TimeoutError:
        child.kill()
        await child.wait()
        raise OSError(f"drawing {len(faces)} avatar(s) took over {DRAW_SECONDS:g} s") from None
    if child.returncode != 0:
        said = err.decode(errors="replace").strip().splitlines()
        raise OSError(f"the avatar drawer exited {child.returncode}: {said[-1] if said else 'saying nothing'}")
    images = json.loads(out)
    if not isinstance(images, list) or len(images) != len(faces):
        raise ValueError("the avatar drawer answered with something else than one image a face")
    return [base64.b64decode(i) for i in images]
