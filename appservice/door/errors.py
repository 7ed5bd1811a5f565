"""The door's errors, under the one tree's ``SurfaceError`` (``engine/errors.py``)."""

from __future__ import annotations

from engine.errors import SurfaceError


class GrantRefused(SurfaceError):
    """A door grant that does not verify: forged, tampered, expired, under an unknown key, for another
    audience, bot or room. The message says which, for the operator's log only: whoever presented it is told
    the same thing every time, since saying which part was wrong tells somebody trying things which to keep."""
