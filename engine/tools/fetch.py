"""The built-in ``fetch`` tool: one guarded HTTP client (SPEC §3; notes part 3a).

A model asks for a url; the url is the model's, so it is treated as hostile. Every hop, the first
and each redirect, passes the same two rules before a byte is sent:

1. **The allow-list.** The url, parsed and normalised (scheme and host lower-cased, default port
   dropped, no userinfo, no fragment, dot segments gone), starts with one of the deployment's
   prefixes — compared part by part, so ``https://example.org.evil.com/`` or
   ``https://example.org@evil/`` never passes for ``https://example.org/``. A path a server could
   read as another path (``;``, an encoded dot, slash, ``%`` or control character) is refused as
   written, so the path compared is the path served.
2. **The address.** The host is resolved once, here, and *every* answer must be a public address
   (``address_allowed``). The connection is then pinned to exactly those checked answers: the
   client's resolver only hands out what was checked and never asks DNS itself, so nothing can
   rebind the name between the check and the connect. TLS still names the host (SNI), as does
   the ``Host`` header.

HTTPS only; plain http only to loopback test servers, behind a setting that is off unless a test
turns it on. No environment proxies, no cookies, a timeout, at most a few redirects, and a byte
cap: the read stops at the cap and an oversize page is an error, not a truncated answer. A page's
HTML is read to a cap of its own, in a quarantined child process killed at its deadline
(``engine.tools.quarantine``), by a reader linear in what it is given (``engine.core.html_tokens``): the
page's author never chooses what reading it costs.

What comes back is fenced as data — a line saying it is untrusted and from where, then the text
between two markers carrying a random token the page does not contain, so nothing in the page
can close the fence and speak as the tool.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from engine.errors import ToolError
from engine.tools.addresses import address_allowed, plain_loopback
from engine.tools.base import RunRef, ToolFn
from engine.tools.fenced import fence
from engine.tools.quarantine import Quarantine

log = logging.getLogger(__name__)

# host, port → the addresses it resolves to (IP strings). Injected in tests; the system's otherwise.
Resolve = Callable[[str, int], Awaitable[Sequence[str]]]

REDIRECTS = frozenset({301, 302, 303, 307, 308})
TEXT_TYPES = frozenset({
    "application/json", "application/xml", "application/xhtml+xml", "application/javascript",
    "application/x-yaml", "application/yaml", "application/toml",
})
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_MEDIA_TYPE = re.compile(r"[a-z0-9][a-z0-9.+_-]*/[a-z0-9][a-z0-9.+_-]*")


@dataclass(frozen=True)
class FetchSettings:
    """How far ``fetch`` may reach. ``allow`` lists url prefixes (``https://example.org/docs/``);
    with none, nothing may be fetched. ``allow_loopback_http_for_tests`` lets a test reach its own
    server on 127.0.0.1 / ::1 (over http too) and relaxes nothing else."""

    allow: tuple[str, ...] = ()
    max_bytes: int = 512 * 1024
    # A page's HTML past this is not parsed (its words past it are not read, and the answer says so).
    max_html_chars: int = 256 * 1024
    # How long reading a page's HTML may take, off the event loop.
    parse_seconds: float = 5.0
    max_chars: int = 20_000
    max_redirects: int = 5
    connect_timeout: float = 5.0
    total_timeout: float = 15.0
    allow_loopback_http_for_tests: bool = False


async def system_resolve(host: str, port: int) -> list[str]:
    """The operating system's answer, every address of it."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


# --- urls ------------------------------------------------------------------------------------------

_NUMERIC_LABEL = re.compile(r"(0x[0-9a-f]*|[0-9]+)", re.IGNORECASE)


@dataclass(frozen=True)
class _Prefix:
    scheme: str
    host: str
    port: int | None
    path: str

    def admits(self, url: URL) -> bool:
        if (url.scheme, url.raw_host, url.explicit_port) != (self.scheme, self.host, self.port):
            return False
        path = url.raw_path
        return path == self.path or path.startswith(self.path if self.path.endswith("/") else self.path + "/")


def normalise(raw: str | URL) -> URL:
    """``raw`` as it is compared and fetched: absolute, http(s), lower-case host without a trailing
    dot, default port and fragment dropped, no userinfo, dot segments gone. Raises ToolError."""
    try:
        url = raw if isinstance(raw, URL) else URL(raw.strip())
        # Read before the url is parsed: parsing decodes "%2e" and drops the dot segments it makes.
        as_written = url.raw_path if isinstance(raw, URL) else urlsplit(raw.strip()).path
        host_written = url.raw_host
    except Exception as exc:  # yarl reads hostile text: whatever it raises (IndexError too) is the input's fault
        raise ToolError(f"that is not a url I can read: {str(raw)[:200]} ({type(exc).__name__})") from None
    shown = str(url)[:200]
    if url.scheme not in ("https", "http"):
        raise ToolError(f"only https urls can be fetched, not {shown}")
    if url.raw_user is not None or url.raw_password is not None:
        raise ToolError(f"a url with a user name or password in it is not allowed: {shown}")
    host = (host_written or "").lower()
    if host.endswith("."):
        host = host[:-1]
    if not host or not url.is_absolute():
        raise ToolError(f"that url names no host: {shown}")
    if "%" in host:
        raise ToolError(f"an address with a zone in it is not allowed: {shown}")
    for path in (as_written, url.raw_path):
        why = _path_refusal(path)
        if why is not None:
            raise ToolError(f"a url with {why} in its path is not allowed: {str(raw).strip()[:200]}")
    if any(segment in (".", "..") for segment in url.path.split("/")):
        raise ToolError(f"a url with . or .. in its path is not allowed: {shown}")
    last = host.rsplit(".", 1)[-1]
    if ":" not in host and _NUMERIC_LABEL.fullmatch(last):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise ToolError(
                f"that address is not allowed: {host} is not written as four decimal numbers (a.b.c.d)"
            ) from None
    port = url.explicit_port
    if port == {"https": 443, "http": 80}[url.scheme]:
        port = None
    return URL.build(
        scheme=url.scheme, host=f"[{host}]" if ":" in host else host, port=port, path=url.raw_path or "/", query_string=url.raw_query_string,
        encoded=True,
    )


# What a server may read differently from how the allow-list compares the path, so the path compared
# would not be the path served: "/docs/..;/admin" is "/admin" to a Java server; "%252e%252e" is ".." to
# one that decodes twice; an encoded dot or slash is a dot segment or a separator after decoding.
_PATH_REFUSALS = (
    (re.compile(r"\\|%2f|%5c", re.IGNORECASE), "an encoded slash"),
    (re.compile(r"%2e", re.IGNORECASE), "an encoded dot"),
    (re.compile(r"%25"), "an encoded %"),
    (re.compile(r";"), "a ;"),
    (re.compile(r"%[01][0-9a-f]|%7f", re.IGNORECASE), "an encoded control character"),
)


def _path_refusal(path: str) -> str | None:
    """Why a url's path, as written, is refused (what in it), or None."""
    return next((why for pattern, why in _PATH_REFUSALS if pattern.search(path)), None)


def _redirected(url: URL, location: str) -> URL:
    """Where a redirect from ``url`` to ``location`` goes, normalised; its path read as written first,
    as a url the model gave is."""
    try:
        why = _path_refusal(urlsplit(location).path)
        joined = url.join(URL(location))
    except Exception as exc:  # a hostile Location: whatever the parsers raise (IndexError too) is its fault
        raise ToolError(f"{url} redirected to a url I cannot read: {location[:200]} ({type(exc).__name__})") from None
    if why is not None:
        raise ToolError(f"{url} redirected to a url with {why} in its path, which is not allowed: {location[:200]}")
    return normalise(joined)


def _prefix(text: str) -> _Prefix:
    try:
        url = normalise(text)
    except ToolError as exc:
        raise ValueError(f"fetch allow-list: {text!r}: {exc}") from exc
    if url.raw_query_string:
        raise ValueError(f"fetch allow-list: {text!r}: a prefix has no query")
    return _Prefix(url.scheme, url.raw_host or "", url.explicit_port, url.raw_path or "/")


# --- the tool --------------------------------------------------------------------------------------

class _Pinned(AbstractResolver):
    """The client's only resolver: it answers with the addresses ``fetch`` checked for a host and
    nothing else — never DNS — so the connection goes where the check looked."""

    def __init__(self) -> None:
        self.checked: dict[str, list[str]] = {}

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        addresses = self.checked.get(host.lower().rstrip("."))
        if not addresses:
            raise OSError(f"{host} was not checked before connecting")
        return [
            ResolveResult(
                hostname=host, host=ip, port=port,
                family=socket.AF_INET6 if ":" in ip else socket.AF_INET, proto=0, flags=socket.AI_NUMERICHOST,
            )
            for ip in addresses
        ]

    async def close(self) -> None:
        return None


@dataclass(frozen=True)
class Page:
    """What one guarded GET brought back: where it ended up (after redirects), its media type and its bytes
    (at most ``max_bytes``)."""

    url: URL
    kind: str
    body: bytes
    charset: str | None


Get = Callable[[str], Awaitable[Page]]


def make_get(settings: FetchSettings, *, resolve: Resolve = system_resolve) -> Get:
    """The guarded GET under ``fetch`` (both rules on every hop, the byte cap, text pages only), for callers
    that read the bytes themselves (a member bot's feeds). Raises ToolError; raises ValueError at once for an
    allow-list entry that is not a plain https/http prefix."""
    prefixes = tuple(_prefix(text) for text in settings.allow)

    async def check(url: URL, pinned: _Pinned) -> None:
        if url.scheme == "http" and not settings.allow_loopback_http_for_tests:
            raise ToolError(f"only https urls can be fetched, not {url}")
        if not any(prefix.admits(url) for prefix in prefixes):
            allowed = ", ".join(settings.allow) or "nothing (none are configured)"
            raise ToolError(f"that url is not on the list this bot may fetch: {url} (allowed: {allowed})")
        host = url.raw_host or ""
        try:  # an address literal is its own answer (and the client connects to it without asking)
            addresses = [str(ipaddress.ip_address(host))]
        except ValueError:
            try:
                addresses = list(await resolve(host, url.port or 443))
            except OSError as exc:
                raise ToolError(f"{host} could not be found ({exc})") from exc
        if not addresses:
            raise ToolError(f"{host} could not be found (no address)")
        for ip in addresses:
            why = address_allowed(ip)
            if why is not None and not (settings.allow_loopback_http_for_tests and plain_loopback(ip)):
                if ip == host:  # an address written in the url: saying what it is tells nobody anything new
                    raise ToolError(f"that address is not allowed: {why}")
                # A name that resolves inward: which private address it is stays in the log (the words go back
                # to the model, and through it to whoever asked).
                log.info("fetch refused %s: it resolves to %s (%s)", host, ip, why)
                raise ToolError(f"that address is not allowed: {host} is not a public address")
        if url.scheme == "http" and not all(plain_loopback(ip) for ip in addresses):
            raise ToolError(f"only https urls can be fetched, not {url}")
        pinned.checked[host] = addresses

    async def get(raw: str) -> Page:
        url = normalise(raw)
        pinned = _Pinned()
        timeout = aiohttp.ClientTimeout(total=settings.total_timeout, connect=settings.connect_timeout)
        connector = aiohttp.TCPConnector(resolver=pinned, use_dns_cache=False, force_close=True)
        headers = {"Accept": "text/html, text/plain;q=0.9, */*;q=0.1", "Accept-Encoding": "gzip, deflate",
                   "User-Agent": "summon-fetch/1"}
        try:
            async with asyncio.timeout(settings.total_timeout), aiohttp.ClientSession(
                connector=connector, trust_env=False, cookie_jar=aiohttp.DummyCookieJar(), timeout=timeout,
                headers=headers,
            ) as session:
                for _hop in range(settings.max_redirects + 1):
                    await check(url, pinned)
                    async with session.get(url, allow_redirects=False) as response:
                        if response.status in REDIRECTS:
                            location = response.headers.get("Location")
                            if not location:
                                raise ToolError(f"{url} answered {response.status} without saying where to")
                            url = _redirected(url, location)
                            continue
                        return await _body(url, response, settings)
                raise ToolError(f"more than {settings.max_redirects} redirects; stopped at {url}")
        except TimeoutError as exc:
            raise ToolError(f"{url} took longer than {settings.total_timeout:g}s; gave up") from exc
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            raise ToolError(f"could not fetch {url}: {exc}") from exc

    return get


def make_fetch(settings: FetchSettings, quarantine: Quarantine, *, resolve: Resolve = system_resolve) -> ToolFn:
    """The built-in ``fetch``: ``{"url": str}`` → the page's text, fenced as untrusted data; its HTML read in
    ``quarantine``. Raises ValueError at once for an allow-list entry that is not a plain https/http prefix."""
    get = make_get(settings, resolve=resolve)

    async def fetch(run: RunRef, arguments: dict[str, Any]) -> str:
        try:
            raw = arguments.get("url")
            if not isinstance(raw, str) or not raw.strip():
                raise ToolError('fetch needs {"url": "https://…"}')
            return await page_text(await get(raw), settings, quarantine)
        except ToolError as exc:
            log.info("fetch refused or failed: %s", exc, extra={"run": run.id, "bot": run.bot})
            raise

    return fetch


async def _body(url: URL, response: aiohttp.ClientResponse, settings: FetchSettings) -> Page:
    if not 200 <= response.status < 300:
        raise ToolError(f"{url} answered {response.status} {response.reason or ''}".rstrip())
    kind = (response.content_type or "").lower()
    if not _MEDIA_TYPE.fullmatch(kind):
        raise ToolError(f"{url} did not say plainly what kind of content it is; fetch reads only text pages")
    if not (kind.startswith("text/") or kind in TEXT_TYPES or kind.endswith(("+json", "+xml"))):
        raise ToolError(f"{url} is {kind or 'of no stated type'}, not text; fetch reads only text pages")
    cap = settings.max_bytes
    if response.content_length is not None and response.content_length > cap:
        raise ToolError(f"{url} is larger than the {cap // 1024} KiB fetch reads ({response.content_length} bytes)")
    body = bytearray()
    async for chunk in response.content.iter_chunked(64 * 1024):
        body += chunk
        if len(body) > cap:
            raise ToolError(f"{url} is larger than the {cap // 1024} KiB fetch reads; stopped there")
    return Page(url, kind, bytes(body), response.charset)


def decoded(page: Page) -> str:
    try:
        return page.body.decode(page.charset or "utf-8", errors="replace")
    except LookupError:  # a charset nobody knows: read it as UTF-8, unreadable bytes replaced
        return page.body.decode("utf-8", errors="replace")


async def page_text(page: Page, settings: FetchSettings, quarantine: Quarantine) -> str:
    """A page as the model reads it: its words (HTML read to text in a quarantined child), capped, fenced."""
    text = decoded(page)
    notes = [f"{len(page.body)} bytes"]
    if page.kind in HTML_TYPES:
        if len(text) > settings.max_html_chars:
            text = text[: settings.max_html_chars]
            notes.append(f"its HTML read to its first {settings.max_html_chars} characters")
        text = await quarantine.words(str(page.url), text, seconds=settings.parse_seconds)
    if len(text) > settings.max_chars:
        text = text[: settings.max_chars]
        notes.append(f"cut to its first {settings.max_chars} characters")
    return fence(str(page.url), page.kind, text, note="; ".join(notes))
