"""A request's body read under a cap while it streams in: what no sender may make the service buffer."""

from __future__ import annotations

from aiohttp import web

CHUNK = 64 * 1024


async def read_capped(request: web.Request, limit: int) -> bytes | None:
    """The body, or None when it is larger than ``limit`` bytes: refused from its Content-Length before a
    byte is read, else at the first chunk past the cap — never read whole and measured after."""
    if request.content_length is not None and request.content_length > limit:
        return None
    body = bytearray()
    async for chunk in request.content.iter_chunked(CHUNK):
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)


def too_large(response: web.Response) -> web.Response:
    """``response`` (a 413), closing the connection: what was not read is not read afterwards either."""
    response.force_close()
    return response
