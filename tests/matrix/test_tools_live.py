"""A bot with an OpenAPI tool answers a question by calling a local API (aiohttp on loopback, described
by a spec the content names); the run's steps show the call and its result."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import asyncpg
import pytest
from aiohttp import web

from appservice.app import Service
from tests.matrix.people import Person
from tests.support import eventually

pytestmark = pytest.mark.matrix
People = Callable[[str], Awaitable[Person]]

SPEC = """\
openapi: 3.0.3
info: {{title: Orders, version: '1'}}
servers: [{{url: 'http://127.0.0.1:{port}/api'}}]
paths:
  /orders/{{number}}:
    get:
      operationId: getOrder
      summary: Where one order is, by its number
      parameters:
        - {{name: number, in: path, required: true, schema: {{type: string}}, description: The order number}}
  /orders:
    delete:
      operationId: deleteEverything
      summary: Not allowed
"""
TOOL = "---\ndescription: The shop's orders.\nopenapi: tools/orders.yaml\noperations: [getOrder]\n---\n"
BOT = "---\nname: Shopkeeper\ntools: [orders]\n---\nYou answer questions about orders by looking them up.\n"


@pytest.fixture
async def orders_api() -> AsyncIterator[tuple[int, list[str]]]:
    asked: list[str] = []

    async def get_order(request: web.Request) -> web.Response:
        asked.append(request.path)
        number = request.match_info["number"]
        if number != "A17":
            return web.json_response({"message": f"no order {number}"}, status=404)
        return web.json_response({"number": "A17", "status": "shipped", "carrier": "Posti", "eta": "2026-12-02"})

    app = web.Application()
    app.router.add_get("/api/orders/{number}", get_order)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield port, asked
    await runner.cleanup()


async def test_a_bot_answers_by_calling_an_openapi_tool(
    people: People, service: Service, content_dir: Path, orders_api: tuple[int, list[str]], sql: asyncpg.Pool,
) -> None:
    port, asked = orders_api
    files = [content_dir / "tools" / "orders.yaml", content_dir / "tools" / "orders.md",
             content_dir / "bots" / "shopkeeper.md"]
    files[0].parent.mkdir(exist_ok=True)
    files[0].write_text(SPEC.format(port=port))
    files[1].write_text(TOOL)
    files[2].write_text(BOT)
    try:
        await eventually(lambda: service.registry().get("shopkeeper") is not None, timeout=10)
        ann = await people("ann")
        room = await ann.room_with("shopkeeper")
        asking = await ann.say(room, "Shopkeeper, where is my order A17?", mention="shopkeeper", script=[
            {"tool_calls": [{"id": "c1", "name": "orders_getOrder", "arguments": {"number": "A17"}}]},
            {"tool_calls": [{"id": "c2", "name": "orders_deleteEverything", "arguments": {}}]},
            {"text": "Order A17 has shipped with Posti; it should arrive on 2 December."},
        ])
        answer = await ann.answer_to(room, asking)
        assert "A17 has shipped" in answer["content"]["body"]
        assert asked == ["/api/orders/A17"]  # the API was called, once; the operation not allowed never was

        run_id = await sql.fetchval("SELECT id FROM agent_runs WHERE trigger_event = $1", asking)
        steps = await sql.fetch(
            "SELECT kind, payload FROM agent_steps WHERE run_id = $1 ORDER BY seq", run_id)
        kinds = [s["kind"] for s in steps]
        assert kinds == ["model_started", "model", "tool_call", "tool_result", "model_started", "model", "tool_call",
                         "tool_result", "model_started", "model", "answer"]
        call, result = steps[2]["payload"], steps[3]["payload"]
        assert call["call"]["name"] == "orders_getOrder" and call["call"]["arguments"] == {"number": "A17"}
        assert not result["is_error"]
        assert json.loads(result["content"])["status"] == "shipped"
        # A name the model was not offered is answered as one that does not exist.
        refused = steps[7]["payload"]
        assert refused["is_error"] and refused["content"] == "There is no tool named 'orders_deleteEverything'."
    finally:
        for path in files:
            path.unlink(missing_ok=True)


async def test_the_service_gives_its_workers_every_builtin(service: Service) -> None:
    from appservice.kinds import KINDS
    from engine.content.parts import BUILTIN_TOOLS

    # open_skill is the worker's own; the others are built by the composition root — the engine's, and those
    # the surfaces registered (the door's current_room, member bots' card).
    assert set(service.worker.toolbox.tools) | {"open_skill"} == set(BUILTIN_TOOLS) | set(KINDS.tools)
    assert service.worker.toolbox.content_tools is not None and service.worker.toolbox.site_classes is not None
