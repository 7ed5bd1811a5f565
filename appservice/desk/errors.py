"""The desk's errors, under the one tree's ``SurfaceError`` (``engine/errors.py``)."""

from __future__ import annotations

from engine.errors import SurfaceError


class RequestRefused(SurfaceError):
    """A surface refused what somebody asked of it (a desk's API call): ``status`` says how (an HTTP status),
    the message says why, in words for whoever asked."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
