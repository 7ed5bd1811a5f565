"""The avatar drawn for one of our users that has no picture of its own: its ``glyph:`` (an emoji, in Debian's
colour emoji font, or a few characters) or its name's initial, white on a colour taken from its name, so no two
bots look alike where a client draws them side by side. The same name and glyph draw the same bytes, so an
avatar is uploaded once (by content hash) however often it is drawn."""

from __future__ import annotations

import colorsys
import hashlib
import io
import logging
import unicodedata
from functools import cache
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

log = logging.getLogger(__name__)

SIZE = 256
EMOJI_FONT = Path("/usr/share/fonts/truetype/noto/NotoColorEmoji.ttf")  # scripts/emoji-font installs it
EMOJI_SIZE = 109  # the one size Noto Color Emoji's bitmaps come in
LETTER_FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf")
Font = ImageFont.FreeTypeFont | ImageFont.ImageFont


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
    try:
        return ImageFont.truetype(str(path), EMOJI_SIZE)
    except OSError:
        log.warning("no emoji font at %s (scripts/emoji-font installs it): emoji glyphs are drawn as initials",
                    path)
        return None


@cache
def _letter_font(size: int) -> Font:
    try:
        return ImageFont.truetype(str(LETTER_FONT), size)
    except OSError:
        return ImageFont.load_default(size)  # Pillow's own: every Latin letter and digit


def draw(name: str, glyph: str | None, *, emoji_font: Path = EMOJI_FONT) -> bytes:
    """A PNG, ``SIZE`` pixels square: ``glyph`` (or the initial) on the name's colour."""
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
