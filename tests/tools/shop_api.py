"""The shop that tests/tools/shop.yaml describes, as an aiohttp app on loopback."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

PRODUCTS: list[dict[str, Any]] = [
    {"sku": "TEA-1", "title": "Green tea", "tags": ["tea", "green"], "in_stock": True},
    {"sku": "TEA-2", "title": "Black tea", "tags": ["tea"], "in_stock": False},
    {"sku": "MUG-1", "title": "Tea mug", "tags": ["mug"], "in_stock": True},
]
# Whose orders are whose, by account (an OpenAPI tool with a subject: reads only its run's subject's).
ORDERS: dict[str, list[str]] = {"@ann:localhost": ["1001"], "@bob:localhost": ["2002", "2003"]}
HUGE_BYTES = 1024 * 1024


@dataclass
class Shop:
    port: int = 0
    seen: list[dict[str, Any]] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"


def app(shop: Shop) -> web.Application:
    routes = web.RouteTableDef()

    def record(request: web.Request, body: Any = None) -> None:
        shop.seen.append({"method": request.method, "raw_path": request.raw_path, "query": list(request.query.items()),
                          "headers": dict(request.headers), "body": body})

    @routes.get("/api/orders/{id}")
    async def get_order(request: web.Request) -> web.Response:
        record(request)
        if request.match_info["id"] != "1001":
            return web.json_response({"message": f"no order {request.match_info['id']}"}, status=404)
        return web.json_response({"id": "1001", "status": "shipped", "lines": [{"sku": "TEA-1", "qty": 2}]})

    @routes.get("/api/products")
    async def list_products(request: web.Request) -> web.Response:
        record(request)
        found = PRODUCTS
        if q := request.query.get("q"):
            found = [p for p in found if q.lower() in str(p["title"]).lower()]
        if tags := request.query.getall("tag", []):
            found = [p for p in found if set(tags) <= set(p["tags"])]
        if request.query.get("in_stock") == "true":
            found = [p for p in found if p["in_stock"]]
        return web.json_response(found)

    @routes.post("/api/notes")
    async def create_note(request: web.Request) -> web.Response:
        body = await request.json()
        record(request, body)
        if not str(body.get("text", "")).strip():
            return web.json_response({"detail": [{"loc": ["body", "text"], "msg": "text may not be empty"}]}, status=422)
        return web.json_response({"id": 7, **body}, status=201)

    @routes.get("/api/files/{name}")
    async def get_file(request: web.Request) -> web.Response:
        record(request)
        return web.Response(text=f"file {request.match_info['name']}", content_type="text/plain")

    @routes.get("/api/huge")
    async def huge(request: web.Request) -> web.StreamResponse:
        record(request)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        try:
            await response.write(b"[")
            for _ in range(HUGE_BYTES // 1024):
                await response.write(json.dumps("x" * 1000).encode() + b",")
            await response.write(b"0]")
        except ConnectionResetError:
            pass
        return response

    @routes.get("/api/boom")
    async def boom(request: web.Request) -> web.Response:
        record(request)
        return web.Response(status=500, text="upstream exploded\n", content_type="text/plain")

    @routes.get("/api/slow")
    async def slow(request: web.Request) -> web.Response:
        record(request)
        await asyncio.sleep(1.5)  # past the tests' 1s timeout, short enough not to hold up the teardown
        return web.json_response({"late": True})

    @routes.get("/api/moved")
    async def moved(request: web.Request) -> web.Response:
        record(request)
        raise web.HTTPFound("/api/products?q=mug")

    @routes.get("/api/elsewhere")
    async def elsewhere(request: web.Request) -> web.Response:
        record(request)
        raise web.HTTPFound("http://shop.example.org/api/products")

    @routes.get("/api/whoami")
    async def whoami(request: web.Request) -> web.Response:
        record(request)
        return web.json_response({"authorization": request.headers.get("Authorization")})

    @routes.get("/api/people/{user}/orders")
    async def orders_of(request: web.Request) -> web.Response:
        record(request)
        return web.json_response({"user": request.match_info["user"], "orders": ORDERS.get(request.match_info["user"], [])})

    @routes.delete("/api/empty")
    async def clear(request: web.Request) -> web.Response:
        record(request)
        return web.Response(status=204)

    application = web.Application()
    application.add_routes(routes)
    return application


@asynccontextmanager
async def serve() -> AsyncIterator[Shop]:
    shop = Shop()
    runner = web.AppRunner(app(shop))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    shop.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield shop
    finally:
        await runner.cleanup()
