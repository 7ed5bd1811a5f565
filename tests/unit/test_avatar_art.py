"""The avatar drawn for a bot with no picture: its glyph or initial on a colour of its own (appservice/matrix/
avatar_art.py), and an `avatar:` in a bot file: an mxc:// uri or an image file under content/."""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from appservice.kinds import KINDS
from appservice.matrix.delivery.avatar_art import EMOJI_FONT, SIZE, colour, draw, initial, is_emoji
from appservice.matrix.delivery.avatars import draw_apart
from engine.content.compile import compile_bot
from engine.content.files import check_images, compile_content


def pixels(png: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG" and image.size == (SIZE, SIZE)
    return image.convert("RGB")


def test_every_name_has_a_colour_of_its_own() -> None:
    colours = {name: colour(name) for name in ["Echo", "Helper", "Support", "summon", "Scribe", "Triage"]}
    assert len(set(colours.values())) == len(colours)
    assert colour("Helper") == colour("helper ")  # the name, not how it is typed
    for r, g, b in colours.values():
        assert max(r, g, b) < 200  # dark enough that white on it reads


def test_the_same_bot_draws_the_same_bytes() -> None:
    assert draw("Helper", "🛟") == draw("Helper", "🛟")  # so it is uploaded once, by its hash


def test_the_service_draws_in_a_child_and_never_holds_pillow() -> None:
    faces = [("Helper", "🛟"), ("echo", None), ("Scribe", "AB")]
    assert asyncio.run(draw_apart(faces, EMOJI_FONT)) == [draw(n, g, emoji_font=EMOJI_FONT) for n, g in faces]
    imported = subprocess.run([sys.executable, "-c", "import sys, appservice.app; print('PIL' in sys.modules)"],
                              capture_output=True, text=True, check=True)
    assert imported.stdout.strip() == "False"


def test_a_child_that_cannot_draw_says_why() -> None:
    with pytest.raises(OSError, match=r"the avatar drawer exited 1: AttributeError"):
        asyncio.run(draw_apart([("Helper", 7)], EMOJI_FONT))  # type: ignore[list-item]


def test_an_initial_on_the_names_colour() -> None:
    image = pixels(draw("echo", None))
    assert image.getpixel((2, 2)) == colour("echo")
    assert (255, 255, 255) in {image.getpixel((x, SIZE // 2)) for x in range(SIZE)}  # the letter, in white
    assert initial("echo") == "E" and initial("  42 bots") == "4" and initial("!!") == "?"


@pytest.mark.skipif(not EMOJI_FONT.is_file(), reason="scripts/emoji-font installs Debian's emoji font")
def test_an_emoji_glyph_is_drawn_in_colour() -> None:
    image = pixels(draw("Helper", "🛟"))
    assert image != pixels(draw("Helper", None))
    reds = [p for p in image.get_flattened_data() if p[0] > 200 and p[1] < 100 and p[2] < 80]  # the ring buoy's red
    assert len(reds) > 500


def test_without_the_emoji_font_an_emoji_glyph_is_the_initial(tmp_path: Path) -> None:
    assert draw("Helper", "🛟", emoji_font=tmp_path / "none.ttf") == draw("Helper", None)


def test_a_few_characters_are_drawn_as_they_are() -> None:
    assert draw("Scribe", "AB") != draw("Scribe", None)
    assert is_emoji("✍️") and is_emoji("🛟") and not is_emoji("AB") and not is_emoji("Ж")


BOT = "---\nname: Scribe\navatar: {avatar}\n---\nYou take notes.\n"


@pytest.mark.parametrize("avatar", ["mxc://example.org/abc", "avatars/scribe.png", "scribe.JPG", "a/b/c.webp"])
def test_an_avatar_is_an_mxc_uri_or_an_image_file(avatar: str) -> None:
    bot = compile_bot("bots/scribe.md", BOT.format(avatar=avatar), kinds=KINDS, server_name="hs")
    assert not isinstance(bot, list) and bot.avatar == avatar


@pytest.mark.parametrize("avatar", ["../secret.png", "/etc/x.png", "avatars/../../x.png", "scribe.svg",
                                    "https://example.org/x.png"])
def test_anything_else_is_refused_at_its_line(avatar: str) -> None:
    errors = compile_bot("bots/scribe.md", BOT.format(avatar=avatar), kinds=KINDS, server_name="hs")
    assert isinstance(errors, list) and errors[0].line == 3
    assert "neither an mxc:// uri nor an image file under content/" in errors[0].message


def _site(tmp_path: Path, avatar: str, image: bytes | None) -> Path:
    root = tmp_path / "content"
    (root / "bots").mkdir(parents=True)
    (root / "bots" / "scribe.md").write_text(BOT.format(avatar=avatar), encoding="utf-8")
    if image is not None:
        (root / "avatars").mkdir()
        (root / "avatars" / "scribe.png").write_bytes(image)
    return root


def test_an_image_file_that_is_there_compiles(tmp_path: Path) -> None:
    root = _site(tmp_path, "avatars/scribe.png", draw("Scribe", None))
    registry = compile_content(root, kinds=KINDS, server_name="hs", kit=None)
    assert not isinstance(registry, list), registry
    assert registry.bots["scribe"].avatar == "avatars/scribe.png"


@pytest.mark.parametrize(("image", "why"), [
    (None, "there is no such file"),
    (b"<svg xmlns='http://www.w3.org/2000/svg'/>", "it is not a PNG, JPEG, GIF or WebP image"),
    (b"\x89PNG\r\n\x1a\n" + b"\0" * (1024 * 1024), "it is over 1024 KiB"),
])
def test_an_image_file_that_cannot_be_used_is_refused_at_its_line(tmp_path: Path, image: bytes | None,
                                                                 why: str) -> None:
    errors = compile_content(_site(tmp_path, "avatars/scribe.png", image), kinds=KINDS, server_name="hs", kit=None)
    assert isinstance(errors, list)
    assert errors[0].path == "bots/scribe.md" and errors[0].line == 3
    assert errors[0].message.startswith("avatar: avatars/scribe.png cannot be used: ") and why in errors[0].message


def test_a_link_out_of_the_content_folder_is_refused(tmp_path: Path) -> None:
    root = _site(tmp_path, "avatars/scribe.png", None)
    (tmp_path / "outside.png").write_bytes(draw("x", None))
    (root / "avatars").mkdir()
    (root / "avatars" / "scribe.png").symlink_to(tmp_path / "outside.png")
    assert check_images(root, ["avatars/scribe.png"])["avatars/scribe.png"] != ""


