"""Reading content from disk (engine.content.files): the site's files, the specs and modules its tools
name (a file under content/, or a url through ``fetch_spec``), and every error under its real path."""

from __future__ import annotations

from pathlib import Path

import pytest

from appservice.kinds import KINDS
from engine.content import Registry, references
from engine.content.files import compile_content, read_content, read_referenced

SERVER = "example.org"
SPEC = """\
{"swagger": "2.0", "host": "pets.example.org", "basePath": "/v1", "schemes": ["https"],
 "paths": {"/pets": {"get": {"operationId": "listPets", "summary": "List the pets\\nin the shop"},
                     "post": {"operationId": "addPet"}}}}
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def tool(ref: str, ops: str = "[listPets]") -> str:
    return f"---\nopenapi: {ref}\noperations: {ops}\n---\n"


def test_an_openapi_tool_from_a_file_under_content(tmp_path: Path) -> None:
    root = write(tmp_path, {"tools/pets.md": tool("tools/pets.json"), "tools/pets.json": SPEC})
    registry = compile_content(root, kinds=KINDS, server_name=SERVER, kit=None, fetch_spec=None)
    assert isinstance(registry, Registry), registry
    pets = registry.tools["pets"]
    assert pets.kind == "openapi" and pets.base_url == "https://pets.example.org/v1"
    assert [(o.operation_id, o.method, o.path, o.summary) for o in pets.allowed] == [
        ("listPets", "GET", "/pets", "List the pets")
    ]


def test_a_spec_file_that_is_not_there(tmp_path: Path) -> None:
    root = write(tmp_path, {"tools/pets.md": tool("tools/pets.json")})
    errors = compile_content(root, kinds=KINDS, server_name=SERVER, kit=None, fetch_spec=None)
    assert [str(e) for e in errors] == [  # type: ignore[union-attr]
        f"tools/pets.md:2: openapi: the spec tools/pets.json does not load: there is no such file in {root.as_posix()}"
    ]


def test_a_spec_at_a_url_is_read_through_fetch_spec(tmp_path: Path) -> None:
    url = "https://api.example.org/openapi.json"
    root = write(tmp_path, {"tools/pets.md": tool(url, "[listPets, addPet]")})
    asked: list[str] = []

    def fetch(address: str) -> str:
        asked.append(address)
        return SPEC

    registry = compile_content(root, kinds=KINDS, server_name=SERVER, kit=None, fetch_spec=fetch)
    assert isinstance(registry, Registry) and asked == [url]
    assert [o.operation_id for o in registry.tools["pets"].allowed] == ["listPets", "addPet"]


def test_a_url_that_does_not_load_names_why(tmp_path: Path) -> None:
    url = "https://api.example.org/openapi.json"
    root = write(tmp_path, {"tools/pets.md": tool(url)})

    def fetch(address: str) -> str:
        raise ConnectionError("connection refused")

    errors = compile_content(root, kinds=KINDS, server_name=SERVER, kit=None, fetch_spec=fetch)
    assert [str(e) for e in errors] == [  # type: ignore[union-attr]
        f"tools/pets.md:2: openapi: the spec {url} does not load: ConnectionError: connection refused"
    ]
    errors = compile_content(root, kinds=KINDS, server_name=SERVER, kit=None, fetch_spec=None)
    assert "urls are not fetched by this compile (no fetch_spec was given)" in str(errors[0])  # type: ignore[index]


def test_a_spec_that_is_not_yaml_says_where(tmp_path: Path) -> None:
    root = write(tmp_path, {"tools/pets.md": tool("tools/pets.yaml"), "tools/pets.yaml": "openapi: 3.0.0\npaths: [\n"})
    errors = compile_content(root, kinds=KINDS, server_name=SERVER, kit=None, fetch_spec=None)
    assert [str(e) for e in errors] == [  # type: ignore[union-attr]
        "tools/pets.md:2: openapi: the spec tools/pets.yaml does not load: it is not JSON or YAML at its line 3"
    ]


def test_a_module_tool_needs_its_file(tmp_path: Path) -> None:
    root = write(tmp_path, {"tools/weather.md": "---\nmodule: tools/weather.py\n---\n"})
    errors = compile_content(root, kinds=KINDS, server_name=SERVER, kit=None, fetch_spec=None)
    assert isinstance(errors, list) and "module: tools/weather.py does not load: there is no such file" in str(errors[0])
    write(root, {"tools/weather.py": 'def run(run, arguments):\n    """The weather."""\n    return "sunny"\n'})
    registry = compile_content(root, kinds=KINDS, server_name=SERVER, kit=None, fetch_spec=None)
    assert isinstance(registry, Registry) and registry.tools["weather"].kind == "module"


def test_a_symlink_out_of_content_is_not_read(tmp_path: Path) -> None:
    outside = write(tmp_path / "outside", {"secret.yaml": SPEC})
    root = write(tmp_path / "content", {"tools/pets.md": tool("tools/pets.yaml")})
    (root / "tools" / "pets.yaml").symlink_to(outside / "secret.yaml")
    assert str(read_referenced(root, {"tools/pets.yaml"}, None)["tools/pets.yaml"]) == (
        "Unavailable(reason='it is outside the content folder')"
    )


def test_references_lists_what_tools_name() -> None:
    assert references(
        {
            "tools/a.md": tool("tools/a.yaml"),
            "tools/b.md": "---\nmodule: tools/b.py\n---\n",
            "tools/broken.md": "no front matter",
            "bots/x.md": "---\nopenapi: not-a-tool.yaml\n---\n",
        }
    ) == {"tools/a.yaml", "tools/b.py"}


def test_a_missing_folder(tmp_path: Path) -> None:
    errors = compile_content(tmp_path / "nope", kinds=KINDS, server_name=SERVER)
    assert [str(e) for e in errors] == [f"{(tmp_path / 'nope').as_posix()}:0: no such content folder"]  # type: ignore[union-attr]


@pytest.mark.parametrize("name", ["README.md", "notes/idea.md"])
def test_stray_markdown_is_not_content(tmp_path: Path, name: str) -> None:
    root = write(tmp_path, {name: "# hi\n"})
    errors = compile_content(root, kinds=KINDS, server_name=SERVER, kit=None)
    assert isinstance(errors, list) and str(errors[0]).startswith(f"{name}:1: not a content file")


def test_a_linked_folder_is_read_like_any_and_a_loop_once(tmp_path: Path) -> None:
    # `make dev` lays its overlay out as links to content/'s folders; a site may link shared skills in.
    shared = tmp_path / "shared"
    (shared / "commands").mkdir(parents=True)
    (shared / "commands" / "recap.md").write_text("---\nhint: A recap\nbot: helper\n---\nRecap.\n")
    site = tmp_path / "site"
    (site / "bots").mkdir(parents=True)
    (site / "bots" / "helper.md").write_text("---\nname: Helper\n---\nHelp.\n")
    (site / "commands").symlink_to(shared / "commands")
    (site / "bots" / "again").symlink_to(site)  # a link back up: read once, never forever
    assert set(read_content(site)) == {"bots/helper.md", "commands/recap.md"}
    registry = compile_content(site, kinds=KINDS, server_name="localhost", fetch_spec=None)
    assert isinstance(registry, Registry) and set(registry.commands) == {"recap"}
