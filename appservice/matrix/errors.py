"""The Matrix surface's errors, under the one tree's ``SurfaceError`` (``engine/errors.py``)."""

from __future__ import annotations

from engine.errors import SurfaceError


class MatrixError(SurfaceError):
    """The homeserver refused or could not be reached: its HTTP status and errcode, and how long it asked us to
    wait (a 429)."""

    def __init__(self, message: str, *, status: int | None = None, errcode: str | None = None,
                 retry_after_ms: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.errcode = errcode
        self.retry_after_ms = retry_after_ms

    @property
    def retryable(self) -> bool:
        return self.status is None or self.status == 429 or self.status >= 500


class NotLeft(MatrixError):
    """Some of our users are still in a room they must leave."""
