"""The pictures the homeserver holds, which an avatar may name as they are (a bot's ``avatar:``, through the
Matrix kind; the service user's, in the config): mxc:// content URIs. Here, not under ``matrix/``, because the
config reads it too."""

from __future__ import annotations

from engine.content.bots import is_image_file
from engine.content.kinds import Pictures

# A picture the homeserver holds: an avatar may name one as it is (content URIs, Matrix spec §13.8).
MXC = Pictures(r"mxc://[A-Za-z0-9.\-:\[\]]+/[A-Za-z0-9_\-]+", "an mxc:// uri")


def check_avatar(value: str) -> str:
    """An avatar as written (the service user's, in the config): an mxc:// uri, or an image file's path under
    content/ (else ValueError)."""
    value = value.strip()
    if not MXC.hold(value) and not is_image_file(value):
        raise ValueError(f"{value!r} is neither an mxc:// uri nor an image file under content/ (e.g. "
                         "avatars/helper.png: .png, .jpg, .gif or .webp)")
    return value
