"""An OpenAPI tool as a model is offered it (issue 6, item 4): each allowed operation's arguments as one
JSON Schema object (parameters, ``$ref``s resolved, the JSON body), where each argument goes, the name a
model calls it by, and the way back from that name to the tool."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from appservice.kinds import KINDS
from engine.content import Registry, Tool, compile_sources
from engine.content.openapi import Spec, read_spec, tool_name
from engine.content.parts import Operation, Param
from engine.tools.schemas import content_specs, describe, resolve

SERVER = "example.org"


def spec(paths: str, components: str = "", extra: str = "") -> str:
    return (
        "openapi: 3.0.3\ninfo: {title: T, version: '1'}\nservers: [{url: 'https://api.example.org/v1'}]\n"
        f"{extra}paths:\n{paths}" + (f"components:\n{components}" if components else "")
    )


def operation(text: str, operation_id: str) -> Operation:
    read = read_spec(text)
    assert isinstance(read, Spec), read
    assert operation_id not in read.problems, read.problems[operation_id]
    return read.operations[operation_id]


def problem(text: str, operation_id: str) -> str:
    read = read_spec(text)
    assert isinstance(read, Spec), read
    return read.problems[operation_id]


def shape(op: Operation) -> tuple[dict[str, Any], list[tuple[str, str, str, bool]]]:
    return op.parameters, [(p.name, p.key, p.where, p.required) for p in op.params]


PARAMETER_CASES = [
    pytest.param(
        "  /orders/{id}:\n    get:\n      operationId: op\n"
        "      parameters: [{name: id, in: path, required: true, schema: {type: integer}, description: The number}]\n",
        {"type": "object", "properties": {"id": {"description": "The number", "type": "integer"}},
         "required": ["id"], "additionalProperties": False},
        [("id", "id", "path", True)],
        id="path-is-always-required",
    ),
    pytest.param(
        "  /products:\n    get:\n      operationId: op\n      parameters:\n"
        "        - {name: q, in: query, schema: {type: string}}\n"
        "        - {name: 'page[size]', in: query, schema: {type: integer, example: 10}}\n"
        "        - {name: X-Trace, in: header, required: true, schema: {type: string}}\n"
        "        - {name: session, in: cookie, schema: {type: string}}\n",
        {"type": "object", "properties": {"q": {"type": "string"}, "page_size_": {"type": "integer"},
                                          "X-Trace": {"type": "string"}},
         "required": ["X-Trace"], "additionalProperties": False},
        [("q", "q", "query", False), ("page_size_", "page[size]", "query", False), ("X-Trace", "X-Trace", "header", True)],
        id="query-header-names-sanitised-optional-cookie-left-out",
    ),
    pytest.param(
        "  /things/{id}:\n    parameters: [{name: id, in: path, required: true, schema: {type: string}},"
        " {name: v, in: query, schema: {type: string}}]\n    get:\n      operationId: op\n"
        "      parameters: [{name: v, in: query, required: true, schema: {type: integer}}]\n",
        {"type": "object", "properties": {"id": {"type": "string"}, "v": {"type": "integer"}},
         "required": ["id", "v"], "additionalProperties": False},
        [("id", "id", "path", True), ("v", "v", "query", True)],
        id="path-item-parameters-shared-the-operations-own-win",
    ),
    pytest.param(
        "  /notes:\n    post:\n      operationId: op\n      requestBody:\n        required: true\n"
        "        content:\n          application/json:\n            schema:\n              type: object\n"
        "              required: [text]\n              properties:\n                text: {type: string}\n"
        "                id: {type: integer, readOnly: true}\n                tags: {type: array, items: {type: string}}\n",
        {"type": "object", "properties": {"text": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}},
         "required": ["text"], "additionalProperties": False},
        [("text", "text", "field", True), ("tags", "tags", "field", False)],
        id="object-body-offered-field-by-field-read-only-left-out",
    ),
    pytest.param(
        "  /bulk:\n    put:\n      operationId: op\n      requestBody:\n        description: The rows\n"
        "        content:\n          application/json:\n            schema: {type: array, items: {type: integer}}\n",
        {"type": "object", "properties": {"body": {"description": "The rows", "type": "array", "items": {"type": "integer"}}},
         "additionalProperties": False},
        [("body", "body", "body", False)],
        id="a-body-that-is-not-an-object-is-one-argument",
    ),
    pytest.param(
        "  /x/{text}:\n    post:\n      operationId: op\n"
        "      parameters: [{name: text, in: path, required: true, schema: {type: string}}]\n"
        "      requestBody:\n        content:\n          application/json:\n"
        "            schema: {type: object, properties: {text: {type: string}}}\n",
        {"type": "object", "properties": {"text": {"type": "string"}, "body": {"type": "object", "properties": {"text": {"type": "string"}}}},
         "required": ["text"], "additionalProperties": False},
        [("text", "text", "path", True), ("body", "body", "body", False)],
        id="a-body-field-named-like-a-parameter-keeps-the-body-whole",
    ),
    pytest.param(
        "  /n:\n    patch:\n      operationId: op\n      requestBody:\n        content:\n"
        "          application/merge-patch+json:\n            schema: {type: object, properties: {n: {type: integer, nullable: true}}}\n",
        {"type": "object", "properties": {"n": {"type": ["integer", "null"]}}, "additionalProperties": False},
        [("n", "n", "field", False)],
        id="json-suffix-media-and-nullable",
    ),
    pytest.param(
        "  /upload:\n    post:\n      operationId: op\n      requestBody:\n        content:\n"
        "          multipart/form-data: {schema: {type: object}}\n",
        {"type": "object", "properties": {}, "additionalProperties": False},
        [],
        id="an-optional-form-body-is-not-offered",
    ),
]


@pytest.mark.parametrize(("paths", "schema", "params"), PARAMETER_CASES)
def test_parameters_become_one_schema(paths: str, schema: dict[str, Any], params: list[Any]) -> None:
    assert shape(operation(spec(paths), "op")) == (schema, params)


def test_swagger_2_parameters_and_body() -> None:
    text = """\
swagger: '2.0'
host: api.example.org
paths:
  /pets/{id}:
    put:
      operationId: op
      parameters:
        - {name: id, in: path, required: true, type: integer, format: int64}
        - {name: tags, in: query, type: array, items: {type: string}}
        - {name: pet, in: body, required: true, schema: {$ref: '#/definitions/Pet'}}
definitions:
  Pet: {type: object, required: [name], properties: {name: {type: string}}}
"""
    assert shape(operation(text, "op")) == (
        {"type": "object", "properties": {"id": {"type": "integer", "format": "int64"},
                                          "tags": {"type": "array", "items": {"type": "string"}},
                                          "name": {"type": "string"}},
         "required": ["id", "name"], "additionalProperties": False},
        [("id", "id", "path", True), ("tags", "tags", "query", False), ("name", "name", "field", True)],
    )


COMPONENTS = """\
  parameters:
    Limit: {name: limit, in: query, schema: {$ref: '#/components/schemas/Count'}}
  requestBodies:
    NewOrder:
      required: true
      content: {application/json: {schema: {$ref: '#/components/schemas/Order'}}}
  schemas:
    Count: {type: integer, minimum: 1}
    Order:
      type: object
      properties:
        lines: {type: array, items: {$ref: '#/components/schemas/Line'}}
        note: {$ref: '#/components/schemas/Note'}
    Line: {type: object, properties: {sku: {type: string}, qty: {$ref: '#/components/schemas/Count'}}}
    Note: {type: string, xml: {name: n}, example: hi}
    Node:
      type: object
      properties:
        name: {type: string}
        children: {type: array, items: {$ref: '#/components/schemas/Node'}}
    Loop: {$ref: '#/components/schemas/Loop'}
"""


def test_refs_are_resolved_everywhere() -> None:
    paths = ("  /orders:\n    post:\n      operationId: op\n      parameters: [{$ref: '#/components/parameters/Limit'}]\n"
             "      requestBody: {$ref: '#/components/requestBodies/NewOrder'}\n")
    schema, params = shape(operation(spec(paths, COMPONENTS), "op"))
    assert schema["properties"] == {
        "limit": {"type": "integer", "minimum": 1},
        "lines": {"type": "array", "items": {"type": "object", "properties": {
            "sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}}}},
        "note": {"type": "string"},
    }
    assert params == [("limit", "limit", "query", False), ("lines", "lines", "field", False),
                      ("note", "note", "field", False)]


def test_a_schema_around_a_circle_is_described_not_followed() -> None:
    paths = ("  /tree:\n    post:\n      operationId: op\n      requestBody:\n        content:\n"
             "          application/json: {schema: {$ref: '#/components/schemas/Node'}}\n")
    schema, _ = shape(operation(spec(paths, COMPONENTS), "op"))
    assert schema["properties"]["children"] == {
        "type": "array", "items": {"description": "a Node, shaped as described above", "type": "object"}}


def test_a_yaml_alias_that_contains_itself_stops_at_the_depth_cap() -> None:
    text = spec("  /x:\n    post:\n      operationId: op\n      requestBody:\n        content:\n"
                "          application/json:\n            schema: &s {type: object, properties: {again: *s}}\n")
    schema, _ = shape(operation(text, "op"))
    depth, node = 0, schema["properties"]["again"]
    while "properties" in node:
        node, depth = node["properties"]["again"], depth + 1
    assert node == {"description": "(nested too deep to describe here)"} and depth > 10


@pytest.mark.parametrize(
    ("paths", "why"),
    [
        pytest.param("  /x:\n    get:\n      operationId: op\n      parameters: [{$ref: '#/components/parameters/Nope'}]\n",
                     "its $ref #/components/parameters/Nope points at nothing in the spec", id="ref-to-nothing"),
        pytest.param("  /x:\n    get:\n      operationId: op\n      parameters: [{$ref: 'other.yaml#/P'}]\n",
                     "it refers to 'other.yaml#/P', and only references inside the spec (#/…) are followed",
                     id="external-ref"),
        pytest.param("  /x:\n    get:\n      operationId: op\n      parameters:\n        - {$ref: '#/components/parameters/A'}\n",
                     "its $ref #/components/parameters/A goes around a circle", id="parameter-ref-circle"),
        pytest.param("  /x:\n    post:\n      operationId: op\n      requestBody:\n        required: true\n"
                     "        content: {multipart/form-data: {schema: {type: object}}}\n",
                     "its request body is multipart/form-data, and only JSON bodies are sent", id="required-form-body"),
        pytest.param("  /x:\n    get:\n      operationId: op\n      parameters: [{name: s, in: cookie, required: true}]\n",
                     "it needs a cookie parameter 's', and only path, query and header ones are sent", id="required-cookie"),
        pytest.param("  /x/{a.b}:\n    get:\n      operationId: op\n      parameters:\n"
                     "        - {name: 'a b', in: query}\n        - {name: 'a_b', in: header}\n",
                     "two of its arguments would both be called 'a_b'", id="names-collide"),
    ],
)
def test_what_cannot_be_offered_is_a_problem_of_that_operation(paths: str, why: str) -> None:
    components = ("  parameters:\n    A: {$ref: '#/components/parameters/B'}\n"
                  "    B: {$ref: '#/components/parameters/A'}\n")
    assert problem(spec(paths, components), "op") == why


def test_a_problem_is_refused_only_where_a_tool_allows_it() -> None:
    text = spec("  /ok:\n    get: {operationId: fine}\n"
                "  /bad:\n    get:\n      operationId: broken\n      parameters: [{$ref: '#/nope'}]\n")
    ok = compile_sources({"tools/t.md": "---\nopenapi: tools/t.yaml\noperations: [fine]\n---\n"},
                         kinds=KINDS, server_name=SERVER, referenced={"tools/t.yaml": text})
    assert isinstance(ok, Registry)
    refused = compile_sources({"tools/t.md": "---\nopenapi: tools/t.yaml\noperations: [fine, broken]\n---\n"},
                              kinds=KINDS, server_name=SERVER, referenced={"tools/t.yaml": text})
    assert [str(e) for e in refused] == [
        "tools/t.md:3: operations: 'broken' of tools/t.yaml cannot be offered to a model:"
        " its $ref #/nope points at nothing in the spec"
    ]


def test_server_variables_and_a_relative_server_against_the_specs_url() -> None:
    read = read_spec(spec("  /x:\n    get: {operationId: op}\n").replace(
        "servers: [{url: 'https://api.example.org/v1'}]",
        "servers: [{url: 'https://{region}.example.org/{v}', variables: {region: {default: eu}, v: {default: v2}}}]"))
    assert isinstance(read, Spec) and read.base_url == "https://eu.example.org/v2"
    relative = spec("  /x:\n    get: {operationId: op}\n").replace("https://api.example.org/v1", "/api")
    url = "https://docs.example.org/specs/openapi.yaml"
    registry = compile_sources({"tools/t.md": f"---\nopenapi: {url}\noperations: [op]\n---\n"},
                               kinds=KINDS, server_name=SERVER, referenced={url: relative})
    assert isinstance(registry, Registry) and registry.tools["t"].base_url == "https://docs.example.org/api"


# --- names, descriptions, and the way back -------------------------------------------------------

@pytest.mark.parametrize(
    ("file", "operation_id", "name"),
    [
        ("shop", "getOrder", "shop_getOrder"),
        ("shop", "orders.get/{id}", "shop_orders_get__id_"),
        ("weather", None, "weather"),
        ("my-api", "список", "my-api_______"),
        # a long name keeps its start and a hash of the whole
        ("a", "x" * 80, f"a_{'x' * 53}_" + hashlib.sha256(f"a_{'x' * 80}".encode()).hexdigest()[:8]),
    ],
)
def test_tool_names_are_what_providers_accept(file: str, operation_id: str | None, name: str) -> None:
    made = tool_name(file, operation_id)
    assert made == name
    assert len(made) <= 64 and all(c.isascii() and (c.isalnum() or c in "_-") for c in made)


def test_long_names_that_share_a_start_stay_apart() -> None:
    assert tool_name("a", "x" * 80 + "1") != tool_name("a", "x" * 80 + "2")


SHOP = spec(
    "  /orders/{id}:\n    get:\n      operationId: getOrder\n      summary: One order by its number\n"
    "      parameters: [{name: id, in: path, required: true, schema: {type: string}}]\n"
    "  /notes:\n    post: {operationId: createNote}\n"
)


def registry(sources: dict[str, str], **referenced: str) -> Registry:
    compiled = compile_sources(sources, kinds=KINDS, server_name=SERVER, referenced={"tools/shop.yaml": SHOP, **referenced})
    assert isinstance(compiled, Registry), "\n".join(map(str, compiled))
    return compiled


def test_content_specs_of_an_openapi_tool() -> None:
    shop = registry({"tools/shop.md": "---\ndescription: The shop's orders\nopenapi: tools/shop.yaml\n"
                                      "operations: [getOrder, createNote]\n---\n"}).tools["shop"]
    specs = content_specs(shop)
    assert [(s.name, s.description, op) for s, op in specs] == [
        ("shop_getOrder", "The shop's orders. One order by its number", "getOrder"),
        ("shop_createNote", "The shop's orders", "createNote"),
    ]
    assert specs[0][0].parameters == {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"],
                                      "additionalProperties": False}
    specs[0][0].parameters["properties"].clear()  # a copy: the compiled content is untouched
    assert content_specs(shop)[0][0].parameters["properties"] == {"id": {"type": "string"}}


@pytest.mark.parametrize(
    ("description", "summary", "said"),
    [
        (None, "One order", "One order"),
        ("Orders.", "One order", "Orders. One order"),
        ("Orders", None, "Orders"),
        (None, None, "GET /orders/{id}"),
    ],
)
def test_describe(description: str | None, summary: str | None, said: str) -> None:
    tool = Tool(name="shop", kind="openapi", openapi="tools/shop.yaml", operations=("op",), description=description,
                source_path="tools/shop.md")
    assert describe(tool, Operation(operation_id="op", method="GET", path="/orders/{id}", summary=summary)) == said


def test_content_specs_of_a_code_tool() -> None:
    module = 'PARAMETERS = {"properties": {"city": {"type": "string"}}, "required": ["city"]}\n' \
             'async def run(run, arguments):\n    """The weather in a city."""\n    return "sun"\n'
    tools = registry({"tools/weather.md": "---\nmodule: tools/weather.py\n---\n"}, **{"tools/weather.py": module}).tools
    assert [(s.name, s.description, s.parameters, op) for s, op in content_specs(tools["weather"])] == [
        ("weather", "The weather in a city.",
         {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}, None)
    ]


def test_resolve_maps_a_models_name_back() -> None:
    tools = registry({
        "tools/shop.md": "---\nopenapi: tools/shop.yaml\noperations: [getOrder]\n---\n",
        "tools/weather.md": "---\ndescription: Weather.\nmodule: tools/weather.py\n---\n",
    }, **{"tools/weather.py": "def run(run, arguments):\n    return ''\n"}).tools
    found = resolve(tools, "shop_getOrder")
    assert found is not None and found[0].name == "shop" and found[1] is not None
    assert found[1].operation_id == "getOrder"
    assert resolve(tools, "weather") == (tools["weather"], None)
    for unknown in ("shop_createNote", "shop", "fetch", "weather_run", ""):
        assert resolve(tools, unknown) is None


def test_a_name_a_model_would_call_two_things_is_refused() -> None:
    spec_text = spec("  /me:\n    get: {operationId: me}\n  /b:\n    get: {operationId: b_c}\n"
                     "  /c:\n    get: {operationId: c}\n")
    refused = compile_sources(
        {
            "tools/about.md": "---\nopenapi: tools/api.yaml\noperations: [me]\n---\n",
            "tools/a.md": "---\nopenapi: tools/api.yaml\noperations: [b_c]\n---\n",
            "tools/a_b.md": "---\nopenapi: tools/api.yaml\noperations: [me, c]\n---\n",
            "tools/fetch.md": "---\ndescription: Mine.\nmodule: tools/c.py\n---\n",
        },
        kinds=KINDS, server_name=SERVER,
        referenced={"tools/api.yaml": spec_text, "tools/c.py": "def run(run, arguments): ...\n"},
    )
    assert isinstance(refused, list)
    assert [str(e) for e in refused] == [
        "tools/a_b.md:3: a model would call this tool 'a_b_c', already the name of an operation of tools/a.md",
        "tools/about.md:3: a model would call this tool 'about_me', already the name of a built-in tool",
        # A file named after a built-in is that built-in's (for:, needs:, personal:), never a tool of its own.
        "tools/fetch.md:3: 'fetch' is a built-in tool: a file of that name sets only its for:, needs:, personal:"
        " (module: is not one of them; an OpenAPI or code tool takes a name of its own)",
    ]


def test_param_models_are_strict() -> None:
    with pytest.raises(ValueError, match="where"):
        Param(name="a", key="a", where="cookie")
