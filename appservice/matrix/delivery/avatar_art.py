"""The avatar drawn for one of our users that has no picture of its own: its ``glyph:`` (an emoji, in Debian's
colour emoji font, or a few characters) or its name's initial, white on a colour taken from its name, so no two
bots look alike where a client draws them side by side. The same name and glyph draw the same bytes, so an
avatar is uploaded once (by content hash) however often it is drawn.

The service draws in a child of its own (``python -m appservice.matrix.delivery.avatar_art``, ``avatars.py``), so
Pillow is imported only there and never held by ``summon serve``: this module imports it where it draws."""

from __future__ import annotations

import base64
import colorsys
import hashlib
import io
import json
import logging
import sys
import unicodedata
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PIL import Image, ImageFont

log = logging.getLogger(__name__)

# Changes when the same name and glyph would be drawn differently: a drawn avatar is remembered by what it is
# drawn from (``avatars.recipe``), so the service draws nothing it drew before.
ART = 1
SIZE = 256
EMOJI_FONT = Path("/usr/share/fonts/truetype/noto/NotoColorEmoji.ttf")  # scripts/emoji-font installs it
EMOJI_SIZE = 109  # the one size Noto Color Emoji's bitmaps come in
LETTER_FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf")


def colour(name: str) -> tuple[int, int, int]:
    """A colour of its own for ``name``: a hue from its hash, dark enough under white."""
    digest = hashlib.sha256(name.strip().casefold().encode()).digest()
    hue = int.from_bytes(digest[:2], "big") / 65536
    saturation = 0.45 + digest[2] / 255 * 0.25
    r, g, b = colorsys.hls_to_rgb(hue, 0.40, saturation)
    return round(r * 255), round(g * 255), round(b * 255)


def initial(name: str) -> str:
    """The name's first letter or digit, upper-cased ("?" for a name with none)."""
    return next((c.upper() for c in name if c.isalnum()), "?")


def is_emoji(glyph: str) -> bool:
    """Whether ``glyph`` is drawn with the emoji font (a pictograph), not as letters."""
    return any(unicodedata.category(c) == "So" or ord(c) >= 0x1F000 for c in glyph)


@cache
def _emoji_font(path: Path) -> ImageFont.FreeTypeFont | None:
    from PIL import ImageFont

    try:
        return ImageFont.truetype(str(path), EMOJI_SIZE)
    except OSError:
        log.warning("no emoji font at %s (scripts/emoji-font installs it): emoji glyphs are drawn as initials",
                    path)
        return None


@cache
def _letter_font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    from PIL import ImageFont

    try:
        return ImageFont.truetype(str(LETTER_FONT), size)
    except OSError:
        return ImageFont.load_default(size)  # Pillow's own: every Latin letter and digit


def draw(name: str, glyph: str | None, *, emoji_font: Path = EMOJI_FONT) -> bytes:
    """A PNG, ``SIZE`` pixels square: ``glyph`` (or the initial) on the name's colour."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (SIZE, SIZE), colour(name))
    text = (glyph or "").strip() or initial(name)
    font = _emoji_font(emoji_font) if is_emoji(text) else None
    if is_emoji(text) and font is not None:
        # Drawn at the font's one size, then scaled to most of the square.
        mark = Image.new("RGBA", (EMOJI_SIZE * 3, EMOJI_SIZE * 2), (0, 0, 0, 0))
        ImageDraw.Draw(mark).text((mark.width // 2, mark.height // 2), text, font=font, embedded_color=True,
                                  anchor="mm")
        box = mark.getbbox()
        if box is not None:
            mark = mark.crop(box)
            scale = SIZE * 0.6 / max(mark.width, mark.height)
            mark = mark.resize((max(1, round(mark.width * scale)), max(1, round(mark.height * scale))),
                               Image.Resampling.LANCZOS)
            image.paste(mark, ((SIZE - mark.width) // 2, (SIZE - mark.height) // 2), mark)
            return _png(image)
        text = initial(name)
    elif is_emoji(text):
        text = initial(name)
    letters = _letter_font(int(SIZE * (0.55 if len(text) == 1 else 0.9 / len(text))))
    ImageDraw.Draw(image).text((SIZE / 2, SIZE / 2), text, font=letters, fill=(255, 255, 255), anchor="mm")
    return _png(image)


def _png(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()


def main() -> int:
    """The child's side: a JSON object on stdin (``faces``: [name, glyph] pairs; ``emoji_font``), each face's PNG
    in base64 on stdout, in order."""
    asked = json.loads(sys.stdin.buffer.read())
    font = Path(asked["emoji_font"])
    drawn = [base64.b64encode(draw(name, glyph, emoji_font=font)).decode() for name, glyph in asked["faces"]]
    sys.stdout.write(json.dumps(drawn))
    return 0


if __name__ == "__main__":
    sys.exit(main())
