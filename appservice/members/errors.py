"""Member bots' errors, under the one tree's ``SurfaceError`` (``engine/errors.py``)."""

from __future__ import annotations

from engine.errors import SurfaceError


class CharterError(SurfaceError):
    """A member bot's charter could not be used: the message says why, in words the builder can relay."""


class CharterUnreadable(CharterError):
    """A stored charter that does not unseal (a key no longer configured, a corrupt or tampered row) or no
    longer reads as a charter. It fails closed for that charter alone: the others run on."""


class CharterRefused(CharterError):
    """Somebody may not do that to this charter (overwrite it, remove it, make it for somebody else)."""
