"""OpenAPI tools against a real API on loopback (issue 6, item 4): tests/tools/shop.yaml, compiled as a
site would, called through ``OpenAPITools`` — the requests the shop saw, the text the model reads, and
every failure as words the model can act on."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from appservice.kinds import KINDS
from engine.content import Registry, Tool, compile_sources
from engine.errors import ToolError
from engine.tools.base import RunRef
from engine.tools.code import CodeTools
from engine.tools.openapi import OpenAPITools
from engine.tools.schemas import content_specs, resolve
from engine.tools.site import SiteTools
from tests.tools.shop_api import Shop, serve

SPEC = (Path(__file__).parent / "shop.yaml").read_text(encoding="utf-8")
OPERATIONS = ["getOrder", "listProducts", "createNote", "getFile", "getHuge", "boom", "slow", "moved", "elsewhere",
              "whoami", "clear"]


@pytest.fixture
async def shop() -> AsyncIterator[Shop]:
    async with serve() as running:
        yield running


def compiled(shop: Shop) -> Tool:
    spec = SPEC.replace("{port: {default: '1'}}", f"{{port: {{default: '{shop.port}'}}}}")
    registry = compile_sources(
        {"tools/shop.md": f"---\ndescription: The tea shop's API.\nopenapi: tools/shop.yaml\noperations: {OPERATIONS}\n---\n"},
        kinds=KINDS, server_name="example.org",
        referenced={"tools/shop.yaml": spec},
    )
    assert isinstance(registry, Registry), "\n".join(map(str, registry))
    return registry.tools["shop"]


@pytest.fixture
async def api() -> AsyncIterator[OpenAPITools]:
    async with OpenAPITools(timeout=1.0, max_bytes=256 * 1024, headers={"shop": {"Authorization": "Bearer s3cret"}}) as tools:
        yield tools


async def call(api: OpenAPITools, tool: Tool, name: str, arguments: dict[str, Any]) -> str:
    found = resolve({"shop": tool}, name)
    assert found is not None and found[1] is not None, name
    return await api.call(found[0], found[1], arguments)


async def test_the_model_is_offered_what_the_spec_says(shop: Shop) -> None:
    specs = {spec.name: spec for spec, _ in content_specs(compiled(shop))}
    assert specs["shop_getOrder"].description == "The tea shop's API. One order by its number"
    assert specs["shop_createNote"].parameters == {
        "type": "object",
        "properties": {"X-Trace": {"type": "string"},
                       "text": {"type": "string", "description": "What to tell the staff"},
                       "order": {"type": ["string", "null"]}},
        "required": ["text"],
        "additionalProperties": False,
    }


async def test_get_by_id(shop: Shop, api: OpenAPITools) -> None:
    out = await call(api, compiled(shop), "shop_getOrder", {"id": "1001"})
    assert json.loads(out) == {"id": "1001", "status": "shipped", "lines": [{"sku": "TEA-1", "qty": 2}]}
    assert out.startswith('{\n "id": "1001"')  # re-indented for reading
    assert shop.seen[-1]["raw_path"] == "/api/orders/1001"
    assert shop.seen[-1]["headers"]["Authorization"] == "Bearer s3cret"


async def test_query_filters_lists_and_booleans(shop: Shop, api: OpenAPITools) -> None:
    tool = compiled(shop)
    out = await call(api, tool, "shop_listProducts", {"q": "tea", "tag": ["tea"], "in_stock": True})
    assert [p["sku"] for p in json.loads(out)] == ["TEA-1"]
    assert shop.seen[-1]["query"] == [("q", "tea"), ("tag", "tea"), ("in_stock", "true")]
    assert [p["sku"] for p in json.loads(await call(api, tool, "shop_listProducts", {}))] == ["TEA-1", "TEA-2", "MUG-1"]


async def test_post_with_a_json_body_and_a_header(shop: Shop, api: OpenAPITools) -> None:
    out = await call(api, compiled(shop), "shop_createNote", {"text": "Ring me", "order": None, "X-Trace": "t-1"})
    assert json.loads(out) == {"id": 7, "text": "Ring me"}
    seen = shop.seen[-1]
    assert seen["method"] == "POST" and seen["body"] == {"text": "Ring me"} and seen["headers"]["X-Trace"] == "t-1"


async def test_a_path_parameter_cannot_climb_out(shop: Shop, api: OpenAPITools) -> None:
    tool = compiled(shop)
    assert await call(api, tool, "shop_getFile", {"name": "../../orders/1001"}) == "file ../../orders/1001"
    assert shop.seen[-1]["raw_path"] == "/api/files/..%2F..%2Forders%2F1001"
    await call(api, tool, "shop_getFile", {"name": "a b?c#d"})
    assert shop.seen[-1]["raw_path"] == "/api/files/a%20b%3Fc%23d"
    for bad in ("..", ".", ""):
        with pytest.raises(ToolError, match=f"'name' cannot be {bad!r}"):
            await call(api, tool, "shop_getFile", {"name": bad})


@pytest.mark.parametrize(
    ("name", "arguments", "said"),
    [
        ("shop_getOrder", {}, "shop_getOrder needs 'id' (it takes: id)"),
        ("shop_getOrder", {"id": "1", "user": "@x:y"}, "shop_getOrder takes no argument 'user' (it takes: id)"),
        ("shop_getOrder", {"id": {"$ne": 1}}, "shop_getOrder: 'id' is one value (text or a number), not dict"),
        ("shop_createNote", {"text": "x", "X-Trace": "a\r\nHost: evil"}, "shop_createNote: 'X-Trace' is one line of text"),
        ("shop_listProducts", {"tag": [{"a": 1}]}, "shop_listProducts: 'tag' takes text, numbers or a list of them"),
    ],
)
async def test_a_bad_argument_is_refused_before_anything_is_sent(
    shop: Shop, api: OpenAPITools, name: str, arguments: dict[str, Any], said: str
) -> None:
    with pytest.raises(ToolError) as refused:
        await call(api, compiled(shop), name, arguments)
    assert str(refused.value) == said
    assert shop.seen == []


@pytest.mark.parametrize(
    ("name", "arguments", "said"),
    [
        ("shop_getOrder", {"id": "999"},
         "shop_getOrder: the API answered HTTP 404 Not Found: no order 999 — there is nothing there: check the id or"
         " the value given"),
        ("shop_createNote", {"text": " "},
         "shop_createNote: the API answered HTTP 422 Unprocessable Entity: text may not be empty — check the"
         " arguments against the tool's description"),
        ("shop_boom", {},
         "shop_boom: the API answered HTTP 500 Internal Server Error: upstream exploded — the API failed; try again"
         " later, or tell the person"),
        ("shop_elsewhere", {}, "shop_elsewhere: the API redirected to another host (shop.example.org); not followed"),
        ("shop_slow", {}, "shop_slow: the API at 127.0.0.1:{port} did not answer within 1s; try again later"),
        ("shop_getHuge", {},
         "shop_getHuge: the API answered with more than 256 KiB, more than can be read; ask for less (a narrower"
         " filter or a smaller page)"),
    ],
)
async def test_failures_are_words_the_model_can_act_on(
    shop: Shop, api: OpenAPITools, name: str, arguments: dict[str, Any], said: str
) -> None:
    with pytest.raises(ToolError) as failed:
        await call(api, compiled(shop), name, arguments)
    assert str(failed.value) == said.format(port=shop.port)


async def test_a_redirect_within_the_api_is_followed(shop: Shop, api: OpenAPITools) -> None:
    out = await call(api, compiled(shop), "shop_moved", {})
    assert [p["sku"] for p in json.loads(out)] == ["MUG-1"]
    assert [s["raw_path"] for s in shop.seen] == ["/api/moved", "/api/products?q=mug"]


async def test_credentials_come_from_the_composition_root_not_the_model(shop: Shop, api: OpenAPITools) -> None:
    assert json.loads(await call(api, compiled(shop), "shop_whoami", {})) == {"authorization": "Bearer s3cret"}
    async with OpenAPITools() as anonymous:
        assert json.loads(await call(anonymous, compiled(shop), "shop_whoami", {})) == {"authorization": None}


async def test_an_empty_answer_says_it_was_done(shop: Shop, api: OpenAPITools) -> None:
    assert await call(api, compiled(shop), "shop_clear", {}) == "done (HTTP 204, nothing in the answer)"


async def test_an_api_that_is_not_there(shop: Shop, api: OpenAPITools) -> None:
    shop.port = closed_port()
    tool = compiled(shop)
    with pytest.raises(ToolError, match=r"could not reach the API at 127\.0\.0\.1:\d+; try again later"):
        await call(api, tool, "shop_getOrder", {"id": "1001"})


def closed_port() -> int:
    """A port nobody listens on: a fresh socket's, closed."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_site_tools_dispatch_by_kind(shop: Shop, api: OpenAPITools, tmp_path: Path) -> None:
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "w.py").write_text("def run(run, arguments):\n    return f'sun in {arguments[\"city\"]}'\n")
    weather = Tool(name="w", kind="module", module="tools/w.py", description="Weather.", source_path="tools/w.md",
                   parameters={"type": "object", "properties": {"city": {"type": "string"}}})
    site = SiteTools(api, CodeTools(tmp_path))
    run = RunRef(id=1, bot="clerk", surface="rooms")
    assert await site.call(weather, None, run, {"city": "Oslo"}) == "sun in Oslo"
    assert json.loads(await site.call(compiled(shop), "getOrder", run, {"id": "1001"}))["status"] == "shipped"
    with pytest.raises(ToolError, match="shop has no operation 'deletePet'"):
        await site.call(compiled(shop), "deletePet", run, {})


# --- whose data: the subject is the run's, never the model's (issue 12 §7) ------------------------------------


def personal(shop: Shop) -> Tool:
    """The shop's ordersOf, with its `user` parameter named as the tool's subject."""
    spec = SPEC.replace("{port: {default: '1'}}", f"{{port: {{default: '{shop.port}'}}}}")
    registry = compile_sources(
        {"tools/orders.md": "---\nopenapi: tools/shop.yaml\noperations: [ordersOf]\nsubject: user\n---\n"},
        kinds=KINDS, server_name="example.org", referenced={"tools/shop.yaml": spec},
    )
    assert isinstance(registry, Registry), "\n".join(map(str, registry))
    return registry.tools["orders"]


async def test_the_subject_is_filled_from_the_run_and_never_offered_to_the_model(shop: Shop, api: OpenAPITools) -> None:
    tool = personal(shop)
    (spec, _), = content_specs(tool)
    assert spec.name == "orders_ordersOf" and set(spec.parameters["properties"]) == {"status"}
    assert "user" not in spec.parameters.get("required", [])
    operation = tool.allowed[0]
    out = json.loads(await api.call(tool, operation, {"status": "paid"}, subject="@ann:localhost"))
    assert out == {"user": "@ann:localhost", "orders": ["1001"]}
    assert shop.seen[-1]["raw_path"] == "/api/people/%40ann%3Alocalhost/orders?status=paid"


@pytest.mark.parametrize("arguments", [{"user": "@bob:localhost"}, {"user": "@bob:localhost", "status": "paid"}])
async def test_a_model_that_names_the_subject_is_refused_and_nothing_is_sent(
        shop: Shop, api: OpenAPITools, arguments: dict[str, Any]) -> None:
    tool = personal(shop)
    with pytest.raises(ToolError) as refused:
        await api.call(tool, tool.allowed[0], arguments, subject="@ann:localhost")
    assert str(refused.value) == "orders_ordersOf takes no argument 'user' (it takes: status)"
    assert shop.seen == []


async def test_with_nobody_to_ask_about_nothing_is_sent(shop: Shop, api: OpenAPITools) -> None:
    tool = personal(shop)
    with pytest.raises(ToolError, match="there is nobody to look this up for"):
        await api.call(tool, tool.allowed[0], {}, subject=None)
    assert shop.seen == []
