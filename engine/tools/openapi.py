"""OpenAPI tools at run time: one allowed operation called with the model's arguments, the answer
handed back as text (JSON re-indented), every failure a ``ToolError`` in words the model can act on.

The request is built only from the compiled operation (``engine.content.openapi``): its path with each
path parameter URL-quoted whole (a value can never add a ``/`` or be ``.``/``..``), its query and header
parameters, its JSON body. Nothing else a model says reaches the wire. A parameter the tool file names as
its ``subject:`` is filled with the run's subject (``subject``, resolved from the run by the caller) and
is not the model's to give: it is not in the schema the model was offered, and a model that names it
anyway is told the operation takes no such argument.

The base url is the spec's server, which the operator configured — so unlike ``fetch`` this client does
not refuse private or loopback addresses: an API on ``http://127.0.0.1:8080`` is a fine tool. It does
refuse to follow a redirect to another host (or any redirect of a request that is not a GET), and it
reads at most ``max_bytes`` of an answer.

Secrets never live in tool files: ``headers`` (tool name → headers, e.g. ``Authorization``) are given by
the composition root, which reads them from the environment variables its config names. They are added
to every request of that tool and win over a header parameter of the same name.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

import httpx

from engine.content.openapi import tool_name
from engine.content.parts import Operation, Tool
from engine.errors import ToolError

log = logging.getLogger(__name__)

TIMEOUT = 15.0
MAX_BYTES = 256 * 1024
MAX_REDIRECTS = 3
# How much of an error's body is read for its message, and how much of the message is kept.
ERROR_BYTES = 16 * 1024
ERROR_CHARS = 400
_HINTS = {
    400: "check the arguments against the tool's description",
    401: "the API refused access; this is not something to retry",
    403: "the API refused access; this is not something to retry",
    404: "there is nothing there: check the id or the value given",
    405: "the API does not allow this here",
    409: "it conflicts with the current state of things",
    410: "it is gone",
    422: "check the arguments against the tool's description",
    429: "the API is busy; try again later",
}
_MESSAGE_KEYS = ("message", "detail", "error_description", "error", "title", "errors", "msg")


@dataclass
class _Request:
    method: str
    url: str
    query: list[tuple[str, str]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    has_body: bool = False


class OpenAPITools:
    """Calls OpenAPI operations through one shared client (close it with ``aclose``)."""

    def __init__(
        self,
        *,
        timeout: float = TIMEOUT,
        max_bytes: int = MAX_BYTES,
        headers: Mapping[str, Mapping[str, str]] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.headers = {name: dict(values) for name, values in (headers or {}).items()}
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
            trust_env=False,
            follow_redirects=False,
            transport=transport,
            headers={"user-agent": "summon", "accept": "application/json, text/*;q=0.9, */*;q=0.5"},
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def __aenter__(self) -> OpenAPITools:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def call(self, tool: Tool, operation: Operation, arguments: dict[str, Any], *,
                   subject: str | None = None) -> str:
        """The API's answer as text, or a ``ToolError`` saying what went wrong and what to do. ``subject``
        is the account the run is about (from the run row), for the operation's subject parameter."""
        name = tool_name(tool.name, operation.operation_id)
        request = build_request(tool, operation, arguments, subject=subject)
        request.headers.update(self.headers.get(tool.name, {}))
        host = urlsplit(request.url).netloc
        try:
            # The client's timeout is per read; this bounds the whole call (a trickling server must not
            # hold a run past its lease).
            async with asyncio.timeout(self.timeout * 2):
                return await self._send(name, request)
        except (httpx.TimeoutException, TimeoutError) as exc:
            raise ToolError(f"{name}: the API at {host} did not answer within {self.timeout:g}s; try again later") from exc
        except httpx.ConnectError as exc:
            raise ToolError(f"{name}: could not reach the API at {host}; try again later, or tell the person") from exc
        except httpx.HTTPError as exc:
            raise ToolError(f"{name}: talking to the API at {host} failed ({type(exc).__name__})") from exc

    async def _send(self, name: str, request: _Request) -> str:
        url, method = request.url, request.method
        for _ in range(MAX_REDIRECTS + 1):
            async with self._client.stream(
                method,
                url,
                params=tuple(request.query) or None,
                headers=request.headers,
                json=request.body if request.has_body else None,
            ) as response:
                if response.is_redirect:
                    url = self._redirect(name, method, url, response)
                    request.query = []  # the new location carries its own query
                    continue
                if response.is_error:
                    raw, _ = await _read(response, ERROR_BYTES)
                    raise ToolError(_failure(name, response, raw))
                raw, whole = await _read(response, self.max_bytes)
                if not whole:
                    raise ToolError(
                        f"{name}: the API answered with more than {self.max_bytes // 1024} KiB, more than can be"
                        " read; ask for less (a narrower filter or a smaller page)"
                    )
                return _text(response, raw)
        raise ToolError(f"{name}: the API redirected more than {MAX_REDIRECTS} times; not followed")

    def _redirect(self, name: str, method: str, url: str, response: httpx.Response) -> str:
        location = response.headers.get("location")
        if not location:
            raise ToolError(f"{name}: the API answered {response.status_code} without saying where to")
        target: str = urljoin(url, str(location))
        here, there = urlsplit(url), urlsplit(target)
        if (here.scheme, here.netloc) != (there.scheme, there.netloc):
            raise ToolError(f"{name}: the API redirected to another host ({there.netloc}); not followed")
        if method != "GET":
            raise ToolError(f"{name}: the API answered a {method} with a redirect; not followed")
        return target


def build_request(tool: Tool, operation: Operation, arguments: object, *, subject: str | None = None) -> _Request:
    """The request an operation and the model's arguments make, or a ``ToolError`` naming the
    argument that is wrong. Only the compiled operation's parameters are sent; the subject parameter
    (if the tool names one) only ever carries ``subject``."""
    name = tool_name(tool.name, operation.operation_id)
    if not tool.base_url or urlsplit(tool.base_url).scheme not in ("http", "https"):
        raise ToolError(f"{name}: the tool's spec names no http(s) server to call; tell the person it is not set up")
    if not isinstance(arguments, dict):
        raise ToolError(f"{name} takes its arguments as a JSON object")
    params = {param.name: param for param in operation.params if not param.subject}
    takes = ", ".join(params) or "nothing"
    unknown = [key for key in arguments if key not in params]
    if unknown:
        raise ToolError(f"{name} takes no argument {', '.join(map(repr, unknown))} (it takes: {takes})")
    missing = [p.name for p in params.values() if p.required and arguments.get(p.name) is None]
    if missing:
        raise ToolError(f"{name} needs {', '.join(map(repr, missing))} (it takes: {takes})")
    if subject is None and any(param.subject for param in operation.params):
        raise ToolError(f"{name}: there is nobody to look this up for — this conversation is not about a known"
                        " account. Say so in your own words; do not guess.")

    path = operation.path
    request = _Request(method=operation.method, url="")
    body: dict[str, Any] = {}
    for param in operation.params:
        value = subject if param.subject else arguments.get(param.name)
        if value is None:
            continue
        match param.where:
            case "path":
                if isinstance(value, dict | list):
                    raise ToolError(f"{name}: '{param.name}' is one value (text or a number), not {type(value).__name__}")
                text = _scalar(value)
                if text in ("", ".", ".."):
                    raise ToolError(f"{name}: '{param.name}' cannot be {text!r}")
                path = path.replace("{" + param.key + "}", quote(text, safe=""))
            case "query":
                for item in value if isinstance(value, list) else [value]:
                    if isinstance(item, dict | list):
                        raise ToolError(f"{name}: '{param.name}' takes text, numbers or a list of them")
                    request.query.append((param.key, _scalar(item)))
            case "header":
                text = _scalar(value)
                if "\r" in text or "\n" in text or isinstance(value, dict | list):
                    raise ToolError(f"{name}: '{param.name}' is one line of text")
                request.headers[param.key] = text
            case "field":
                body[param.key] = value
                request.has_body = True
            case "body":
                request.body, request.has_body = value, True
    if body:
        request.body = body
    if "{" in path:
        raise ToolError(f"{name}: the API's path {operation.path} has a part no argument fills; tell the person")
    request.url = tool.base_url.rstrip("/") + "/" + path.lstrip("/")
    return request


def _scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


async def _read(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """Up to ``limit`` bytes of the body, and whether that was all of it."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > limit:
            return bytes(body[:limit]), False
    return bytes(body), True


def _decode(response: httpx.Response, raw: bytes) -> str:
    return raw.decode(response.encoding or "utf-8", errors="replace")


def _text(response: httpx.Response, raw: bytes) -> str:
    if not raw.strip():
        return f"done (HTTP {response.status_code}, nothing in the answer)"
    text = _decode(response, raw)
    if "json" in response.headers.get("content-type", "").lower():
        try:
            return json.dumps(json.loads(text), ensure_ascii=False, indent=1)
        except ValueError:
            return text
    return text


def _failure(name: str, response: httpx.Response, raw: bytes) -> str:
    status = response.status_code
    hint = _HINTS.get(status) or (
        "the API failed; try again later, or tell the person" if status >= 500 else "the API refused it"
    )
    said = _message(_decode(response, raw))
    reason = f" {response.reason_phrase}" if response.reason_phrase else ""
    return f"{name}: the API answered HTTP {status}{reason}" + (f": {said}" if said else "") + f" — {hint}"


def _message(text: str) -> str:
    """What an error body says: its ``message`` (or ``detail``, ``error``…) if it is JSON, else its text."""
    try:
        data: Any = json.loads(text)
    except ValueError:
        data = None
    for _ in range(3):
        if isinstance(data, dict):
            found = next((data[key] for key in _MESSAGE_KEYS if data.get(key)), None)
            if found is None:
                break
            data = found
        elif isinstance(data, list) and data:
            data = data[0]
        else:
            break
    if isinstance(data, str):
        said = data
    elif data is not None and not isinstance(data, dict | list):
        said = str(data)
    elif isinstance(data, dict | list):
        said = json.dumps(data, ensure_ascii=False)
    else:
        said = text
    said = " ".join(said.split())
    return said[:ERROR_CHARS] + ("…" if len(said) > ERROR_CHARS else "")
