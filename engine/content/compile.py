"""Content files → a Registry, or every error in every file as ``path:line: message``.

The compile never stops at the first problem: an author fixing content wants the whole list at once.
It reads nothing itself. The caller hands in the site's files and the kit's (``{relative path: text}``),
and the files and urls that content names (OpenAPI specs, modules) already read — see
``references`` for which those are, and ``engine.content.files`` for the reading.

A site file replaces the kit's file of the same path outright; ``strings.md`` is the exception and
overrides the kit's per key. Kit files are reported as ``kit/<path>``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from pydantic import BaseModel, ValidationError

from engine.content.base import KIT, SLUG, CompileError
from engine.content.bots import Bot, bot_models, is_uri
from engine.content.explain import explain
from engine.content.grammar import Parsed, parse
from engine.content.kinds import Kinds
from engine.content.link import link
from engine.content.parts import SkillFile, command_file, tool_file
from engine.content.registry import Registry
from engine.content.source import File, Referenced, Settings
from engine.content.strings import Strings, parse_strings

# Matrix user ids are at most 255 bytes, and a bot's slug becomes one.
MAX_USER_ID = 255
FOLDERS = ("bots", "skills", "tools", "commands")
THINGS = {"bots": "bot", "skills": "skill", "tools": "tool", "commands": "command"}
STRINGS = "strings.md"


def compile_sources(
    sources: Mapping[str, str],
    *,
    kinds: Kinds,
    server_name: str,
    kit: Mapping[str, str] | None = None,
    referenced: Referenced | None = None,
    zones: Collection[str] | None = None,
    site_events: Collection[str] | None = None,
    sealed_places: Collection[str] = (),
    puppet_prefix: str = "bot_",
) -> Registry | list[CompileError]:
    """Compile the site's ``{relative path: text}`` over the kit's. Returns the Registry, or every
    error found (sorted by path and line).

    ``referenced`` holds the text of every file or url a content file names (``references`` lists
    them), or an ``Unavailable`` saying why it could not be read. ``zones`` are the IANA zones a
    schedule may name (default: this Python's); ``site_events`` the ``site.<name>`` events the
    deployment posts (default: any); ``sealed_places`` the places a schedule may not speak in (the deployment cannot read them);
    ``puppet_prefix`` what every bot's user id starts with (``@<prefix><slug>:<server>``); ``kinds`` the
    surfaces the deployment runs, each with the keys, rules, built-ins and words it brings.
    """
    if not server_name:
        raise ValueError("compile_sources needs the homeserver's server_name")
    settings = Settings(server_name, kinds, referenced or {}, zones, site_events, sealed_places, puppet_prefix)
    models: dict[str, type[BaseModel]] = {"bots": bot_models(kinds)[0], "skills": SkillFile, "tools": tool_file(kinds),
                                          "commands": command_file(kinds)}
    errors: list[CompileError] = []
    files: dict[str, dict[tuple[bool, str], File]] = {folder: {} for folder in FOLDERS}
    strings: list[Strings] = []
    present: dict[str, set[str]] = {folder: set() for folder in FOLDERS}  # the site's files, compiled or not

    kit = kit or {}
    for is_kit, tree in ((True, kit), (False, sources)):
        for relative in sorted(tree):
            path = KIT + relative if is_kit else relative
            if relative == STRINGS:
                parsed_strings = parse_strings(path, tree[relative], kinds.sections)
                if isinstance(parsed_strings, Strings):
                    strings.append(parsed_strings)
                else:
                    errors.extend(parsed_strings)
                continue
            folder, _, name = relative.partition("/")
            if folder not in FOLDERS or not relative.endswith(".md"):
                errors.append(
                    CompileError(
                        path,
                        1,
                        "not a content file: content holds bots/, skills/, tools/ and commands/ (one .md per"
                        " thing) and strings.md",
                    )
                )
                continue
            if not is_kit:
                present[folder].add(name.removesuffix(".md"))
            read = _read(path, name, tree[relative], models[folder], settings, kit=is_kit)
            if isinstance(read, File):
                files[folder][is_kit, read.name] = read
            else:
                errors.extend(read)

    merged = Strings()
    for layer in strings:  # the kit's first, then the site's over it
        merged = layer.over(merged)
    linked = link(files, merged, settings, present)
    if isinstance(linked, list):
        errors.extend(linked)
    if errors:
        return sorted(errors, key=lambda error: (error.path.startswith(KIT), error.path, error.line))
    assert isinstance(linked, Registry)
    return linked


def references(sources: Mapping[str, str], keys: tuple[str, ...] = ("openapi", "module")) -> set[str]:
    """The files and urls the tool files name (``openapi:``, ``module:``; or only ``keys``), for the
    caller to read and hand back as ``referenced``. Files that do not parse name nothing (their
    errors come later)."""
    found: set[str] = set()
    for path, text in sources.items():
        if not path.startswith("tools/"):
            continue
        parsed = parse(text)
        if isinstance(parsed, Parsed):
            for key in keys:
                value = parsed.data.get(key)
                if isinstance(value, str) and value.strip():
                    found.add(value.strip())
    return found


def avatar_files(sources: Mapping[str, str]) -> set[str]:
    """The image files the bot files name as their ``avatar:`` (a uri is no file), for the caller to
    check and hand back in ``referenced`` ("" for a usable image, an ``Unavailable`` saying why not)."""
    found: set[str] = set()
    for path, text in sources.items():
        if not path.startswith("bots/"):
            continue
        parsed = parse(text)
        value = parsed.data.get("avatar") if isinstance(parsed, Parsed) else None
        if isinstance(value, str) and value.strip() and not is_uri(value.strip()):
            found.add(value.strip())
    return found


def compile_bot(path: str, text: str, *, kinds: Kinds, server_name: str,
                puppet_prefix: str = "bot_") -> Bot | list[CompileError]:
    """One ``bots/<slug>.md`` on its own (no kit, no skills or tools beside it) → a Bot, or its errors."""
    compiled = compile_sources({path: text}, kinds=kinds, server_name=server_name, puppet_prefix=puppet_prefix)
    if isinstance(compiled, list):
        return compiled
    return next(iter(compiled))


def _read(
    path: str, name: str, text: str, model: type[BaseModel], settings: Settings, *, kit: bool
) -> File | list[CompileError]:
    errors: list[CompileError] = []
    stem = name.removesuffix(".md")
    folder = path.removeprefix(KIT).split("/")[0]
    thing = THINGS[folder]
    if "/" in name:
        errors.append(CompileError(path, 1, f"a {thing} file lives directly in {folder}/, not in a folder below it"))
    elif not SLUG.fullmatch(stem):
        named = "the bot's slug" if folder == "bots" else f"the {thing}'s name"
        errors.append(
            CompileError(
                path,
                1,
                f"the file name is {named}: '{stem}' must be lowercase letters, digits, '-' and '_',"
                " starting with a letter or digit",
            )
        )
    elif folder == "bots" and len(f"@{settings.puppet_prefix}{stem}:{settings.server_name}".encode()) > MAX_USER_ID:
        errors.append(CompileError(path, 1, f"the slug '{stem}' is too long for a Matrix user id"))

    parsed = parse(text)
    if isinstance(parsed, list):
        return [*errors, *(CompileError(path, error.line, error.message) for error in parsed)]
    errors.extend(CompileError(path, error.line, error.message) for error in parsed.errors)
    front: BaseModel | None = None
    try:
        front = model.model_validate(
            parsed.data, context={"zones": settings.zones, "site_events": settings.site_events,
                                  **settings.kinds.context()}
        )
    except ValidationError as exc:
        errors.extend(explain(path, parsed, detail, model) for detail in exc.errors(include_url=False))
    if folder == "bots" and not parsed.body.strip() and not parsed.data.get("extends"):
        errors.append(CompileError(path, parsed.closing_line, "a bot needs a prompt: the body is empty"))
    if errors or front is None:
        return errors
    return File(path=path, name=stem, kit=kit, parsed=parsed, front=front)
