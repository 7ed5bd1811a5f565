"""Two proxies the chaos run puts between summon and what it talks to, so a scenario can make a path slow or
silently dead without touching anyone else's traffic:

- ``SlowHomeserver``: an HTTP proxy in front of Synapse for summon's own requests (its ``homeserver.url``),
  adding ``delay`` seconds to every response (the homeserver slow);
- ``SilentTcp``: a TCP proxy in front of PostgreSQL for summon's direct (LISTEN) connections that, ``silent``,
  forwards nothing either way while every socket stays open — a half-open connection: no FIN, no RST, the
  NOTIFY channel just goes quiet.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import aiohttp
from aiohttp import web

HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "host"}


class SlowHomeserver:
    def __init__(self, upstream: str, host: str, port: int) -> None:
        self.upstream = upstream.rstrip("/")
        self.host, self.port = host, port
        self.delay = 0.0
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(auto_decompress=False, timeout=aiohttp.ClientTimeout(total=120))
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP}
        try:
            async with self._session.request(request.method, self.upstream + request.rel_url.raw_path_qs,
                                             headers=headers, data=body or None) as resp:
                data = await resp.read()
                out = {k: v for k, v in resp.headers.items() if k.lower() not in HOP}
                status = resp.status
        except aiohttp.ClientError:
            # Synapse is down: what summon would see without the proxy is a refused connection.
            request.transport.close() if request.transport else None
            raise
        if self.delay:
            await asyncio.sleep(self.delay)
        return web.Response(status=status, body=data, headers=out)


class SilentTcp:
    """``silence()`` kills every connection open now and any made until ``speak()``: their bytes are dropped
    both ways from then on, for good, and their sockets stay open (what a NAT entry evicted, or a firewall that
    drops without a reset, leaves). Connections made after ``speak()`` work."""

    def __init__(self, upstream_host: str, upstream_port: int, host: str, port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.host, self.port = host, port
        self.silent = False
        self.connections = 0
        self._dead: set[int] = set()
        self._live: set[int] = set()
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self._open: set[asyncio.StreamWriter] = set()

    @property
    def dead(self) -> int:
        """Dead connections whose client has not yet given up on them (closed its end)."""
        return len(self._dead & self._live)

    def silence(self) -> None:
        self.silent = True
        self._dead |= self._live

    def speak(self) -> None:
        self.silent = False

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in list(self._open):
            w.close()
        for t in list(self._pipes):
            t.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        n = self.connections
        self._live.add(n)
        if self.silent:
            self._dead.add(n)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            self._live.discard(n)
            return
        self._open.update((writer, up_writer))
        for a, b in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.get_running_loop().create_task(self._pipe(n, a, b))
            self._pipes.add(task)
            task.add_done_callback(self._pipes.discard)

    async def _pipe(self, n: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                if n in self._dead:
                    continue  # dropped on the floor; nobody is told
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._live.discard(n)
            with contextlib.suppress(OSError):
                writer.close()
            self._open.discard(writer)


class LinkRelay:
    """A TCP relay at the core's end of a worker's link (listening on its veth address, forwarding to a service on
    the core's loopback), which can delay every byte by ``delay`` seconds each way (the round trip grows by twice
    that) or ``hold`` everything both ways — a partition: no reset, no error, and what was sent meanwhile arrives,
    in order, once the link is back, as TCP's retransmissions deliver it after a real one. (The kernel here has no
    ``sch_netem``; this is what tc netem would do to the link, in user space, for this link's traffic only.)"""

    def __init__(self, listen_host: str, listen_port: int, upstream_port: int) -> None:
        self.listen = (listen_host, listen_port)
        self.upstream = ("127.0.0.1", upstream_port)
        self.delay = 0.0
        self.held = asyncio.Event()  # set: partitioned
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, *self.listen)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in list(self._writers):
            w.close()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        for a, b in ((reader, up_writer), (up_reader, writer)):
            queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
            self._spawn(self._read(a, queue))
            self._spawn(self._write(queue, b))

    async def _read(self, reader: asyncio.StreamReader, queue: asyncio.Queue[tuple[float, bytes]]) -> None:
        loop = asyncio.get_running_loop()
        try:
            while data := await reader.read(65536):
                queue.put_nowait((loop.time() + self.delay, data))
        except OSError:
            pass
        queue.put_nowait((loop.time() + self.delay, b""))

    async def _write(self, queue: asyncio.Queue[tuple[float, bytes]], writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                at, data = await queue.get()
                while self.held.is_set():
                    await asyncio.sleep(0.05)
                if (wait := at - loop.time()) > 0:
                    await asyncio.sleep(wait)
                if not data:
                    break
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                writer.close()
            self._writers.discard(writer)
