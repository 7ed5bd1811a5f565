"""The second half of the compile: what one file says about another. A tool a bot names exists; a
bot it ``extends:`` exists (and is not itself, around a circle); a command's bot is on the command's
surfaces; an OpenAPI tool's operations are in its spec (the tool files: ``engine.content.link_tools``).
Every refusal names both sides."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.content.base import CompileError, Strict, listed
from engine.content.bots import ALL, Bot, BotFile, bot_fields, bot_models, is_image_file, is_uri
from engine.content.link_tools import check_model_names, compile_tool
from engine.content.openapi import Unavailable
from engine.content.parts import (
    BUILTIN_TOOLS,
    PLACEHOLDER,
    RESERVED_COMMANDS,
    Command,
    CommandFile,
    Skill,
    SkillFile,
    Tool,
)
from engine.content.registry import Registry
from engine.content.source import File, Settings
from engine.content.strings import Strings

Files = Mapping[str, Mapping[tuple[bool, str], File]]


def link(
    files: Files, strings: Strings, settings: Settings, present: Mapping[str, set[str]]
) -> Registry | list[CompileError]:
    """``present`` names every file of each folder, compiled or not: a reference to a file with
    errors of its own is not reported again as a reference to nothing."""
    errors: list[CompileError] = []
    tools = {name: tool for name, file in _named(files["tools"]).items()
             if (tool := compile_tool(name, file, settings, errors))}
    check_model_names(tools, _named(files["tools"]), errors)
    tool_names = set(tools) | set(builtin_tools(settings)) | present["tools"]

    skills: dict[str, Skill] = {}
    for name, file in _named(files["skills"]).items():
        front: SkillFile = file.front
        _check_tools(file, front.tools, tool_names, tools, errors, settings)
        skills[name] = Skill(**_fields(front, SkillFile), name=name, text=file.parsed.body.strip(), source_path=file.path)

    bots = _Bots(files["bots"], strings, settings, tool_names, tools, skills, errors, present)
    compiled = bots.compile_all()
    site_bots = [bot for (kit, _), bot in compiled.items() if not kit]
    kit_bots = [bot for (kit, _), bot in compiled.items() if kit]
    live = {bot.slug: bot for bot in site_bots}

    commands = []
    for name, file in _named(files["commands"]).items():
        command = _command(name, file, live, {b.slug: b for b in kit_bots}, tool_names, tools, errors, present["bots"],
                           settings)
        if command is not None:
            commands.append(command)

    if errors:
        return errors
    return Registry.of(
        settings.server_name, site_bots, skills=skills.values(), tools=tools.values(), commands=commands,
        strings=strings, kit_bots=kit_bots, surface_tools=settings.kinds.tools,
    )


def _named(files: Mapping[tuple[bool, str], File]) -> dict[str, File]:
    """By name, the site's file replacing the kit's of the same name outright."""
    out: dict[str, File] = {}
    for (_, name), file in sorted(files.items(), key=lambda item: not item[0][0]):  # kit first
        out[name] = file
    return out


def _fields(front: Strict, model: type[Strict]) -> dict[str, Any]:
    return {name: getattr(front, name) for name in model.model_fields}


def builtin_tools(settings: Settings) -> tuple[str, ...]:
    """The built-ins a bot names without a file: the engine's and its surfaces' (each offered only on its own)."""
    taken = sorted(set(BUILTIN_TOOLS) & set(settings.kinds.tools))
    if taken:
        raise ValueError(f"a surface's built-in tool is already the engine's: {', '.join(taken)}")
    return tuple(sorted((*BUILTIN_TOOLS, *settings.kinds.tools)))


def _tools_listed(tools: Mapping[str, Tool], settings: Settings) -> str:
    return f"built-ins: {listed(builtin_tools(settings))}; content/tools: {listed(sorted(tools))}"


def _check_tools(
    file: File, names: tuple[str, ...], known: set[str], tools: Mapping[str, Tool], errors: list[CompileError],
    settings: Settings,
) -> None:
    for index, name in enumerate(names):
        if name not in known:
            errors.append(
                CompileError(file.path, file.line("tools", index), f"tools: '{name}' is not a tool ({_tools_listed(tools, settings)})")
            )


class _Bots:
    """Bots compiled in ``extends:`` order, each at most once, a circle refused where it closes."""

    def __init__(
        self,
        files: Mapping[tuple[bool, str], File],
        strings: Strings,
        settings: Settings,
        tool_names: set[str],
        tools: Mapping[str, Tool],
        skills: Mapping[str, Skill],
        errors: list[CompileError],
        present: Mapping[str, set[str]],
    ) -> None:
        self.present = present
        self.files = files
        self.strings = strings
        self.settings = settings
        self.tool_names = tool_names
        self.tools = tools
        self.skills = skills
        self.errors = errors
        self.done: dict[tuple[bool, str], Bot | None] = {}
        self.visiting: list[tuple[bool, str]] = []

    def compile_all(self) -> dict[tuple[bool, str], Bot]:
        for key in sorted(self.files):
            self._compile(key)
        return {key: bot for key, bot in self.done.items() if bot is not None}

    def _parent(self, key: tuple[bool, str], target: str) -> tuple[bool, str] | str:
        """Which file ``extends: target`` means, or why none. A site bot extending its own name
        extends the kit's bot of that name (that is how a site turns a kit bot on)."""
        kit, slug = key
        if not kit and target == slug:
            if (True, slug) in self.files:
                return True, slug
            return f"extends: a bot cannot extend itself ('{slug}'), and the kit has no '{slug}'"
        for candidate in ([(True, target)] if kit else [(False, target), (True, target)]):
            if candidate in self.files:
                return candidate
        if not kit and target in self.present["bots"]:
            return ""  # it has errors of its own
        site = sorted(name for k, name in self.files if not k)
        kits = sorted(name for k, name in self.files if k)
        return f"extends: '{target}' is not a bot (content/bots: {listed(site)}; the kit's: {listed(kits)})"

    def _compile(self, key: tuple[bool, str]) -> Bot | None:
        if key in self.done:
            return self.done[key]
        file = self.files[key]
        front: BotFile = file.front
        parent: Bot | None = None
        if front.extends is not None:
            target = self._parent(key, front.extends)
            if isinstance(target, str):
                if target:
                    self.errors.append(CompileError(file.path, file.line("extends"), target))
                self.done[key] = None
                return None
            if target in self.visiting:
                circle = [*self.visiting[self.visiting.index(target):], key, target]
                shown = " → ".join(self.files[k].path for k in circle)
                self.errors.append(CompileError(file.path, file.line("extends"), f"extends: a circle ({shown})"))
                self.done[key] = None
                return None
            self.visiting.append(key)
            parent = self._compile(target)
            self.visiting.pop()
            if parent is None:  # its own errors are reported at its file
                self.done[key] = None
                return None
        bot = self._bot(file, front, parent)
        self.done[key] = bot
        return bot

    def _avatar(self, file: File, avatar: str) -> None:
        """A picture a surface holds, by its uri, or an image file under content/ that the reader said can be
        used (none said: a compile of text alone, not checked)."""
        kinds = self.settings.kinds
        if is_uri(avatar) and kinds.holds_picture(avatar):
            return
        if is_uri(avatar) or not is_image_file(avatar):
            said = "".join(f"{held} nor " for held in kinds.pictures_said)
            self.errors.append(CompileError(file.path, file.line("avatar"), (
                f"avatar: {avatar!r} is neither {said}an image file under content/ (e.g. avatars/helper.png: .png, "
                ".jpg, .gif or .webp)")))
            return
        image = self.settings.referenced.get(avatar)
        if isinstance(image, Unavailable):
            self.errors.append(CompileError(file.path, file.line("avatar"), f"avatar: {avatar} cannot be used: {image.reason}"))

    def _bot(self, file: File, front: BotFile, parent: Bot | None) -> Bot | None:
        before = len(self.errors)
        _check_tools(file, front.tools, self.tool_names, self.tools, self.errors, self.settings)
        if isinstance(front.skills, tuple):
            for index, name in enumerate(front.skills):
                if name not in self.skills and name not in self.present["skills"]:
                    self.errors.append(
                        CompileError(
                            file.path,
                            file.line("skills", index),
                            f"skills: '{name}' is not a skill (skills: {listed(sorted(self.skills))})",
                        )
                    )
        if front.avatar is not None:
            self._avatar(file, front.avatar)
        body = file.parsed.body.strip()
        if parent is None:
            values = bot_fields(front)
            values["endings"] = {**self.strings.section("endings"), **front.endings}
            prompt = body  # never empty: refused when the file was read
        else:
            values = _inherit(parent, front)
            prompt = f"{parent.prompt}\n\n{body}" if body else parent.prompt
        self._consistent(file, front, values)
        if len(self.errors) > before:
            return None
        # Validated again as the compiled bot, told the surfaces' words as the file was.
        return bot_models(self.settings.kinds)[1].model_validate(
            {**values, "slug": file.name,
             "user_id": f"@{self.settings.puppet_prefix}{file.name}:{self.settings.server_name}",
             "prompt": prompt, "source_path": file.path, "body": body, "file": front},
            context=self.settings.kinds.context(),
        )

    def _consistent(self, file: File, front: BotFile, values: dict[str, Any]) -> None:
        """Fields that only make sense together, on the bot as it is (after ``extends:``), reported
        at the key this file set (a parent's own mistakes are reported at the parent)."""
        said = front.model_fields_set

        def refuse(keys: tuple[str, ...], message: str) -> None:
            mine = [key for key in keys if key in said]
            if mine:
                self.errors.append(CompileError(file.path, file.line(_alias(mine[0]), key=True), message))

        for rule in self.settings.kinds.rules():
            rule(values, refuse)
        if "hears" in said:
            for index, trigger in enumerate(values["hears"]):
                room = getattr(trigger, "in_", None)
                if room is not None and room in self.settings.sealed_places:
                    self.errors.append(
                        CompileError(
                            file.path,
                            file.line("hears", index, "in"),
                            f"hears[{index}].in: {room} is encrypted; a bot cannot read it, so it cannot speak there",
                        )
                    )


def _alias(name: str) -> str:
    return "for" if name == "audience" else name


def _merge(base: Strict, top: Strict) -> Strict:
    """``top`` over ``base``, key by key for what ``top`` says (nested models merged the same way)."""
    values = _fields(base, type(base))
    for name in top.model_fields_set:
        below, above = getattr(base, name), getattr(top, name)
        if isinstance(below, Strict) and type(below) is type(above):
            values[name] = _merge(below, above)
        elif isinstance(below, dict) and isinstance(above, dict):
            values[name] = {**below, **above}
        else:
            values[name] = above
    return type(base)(**values)


def _inherit(parent: Bot, front: BotFile) -> dict[str, Any]:
    """``extends:``: the parent's conduct and tools first, the child's words after; what the child
    says wins, lists grow (parent's first), limits merge key by key."""
    values = bot_fields(parent)
    for name in front.model_fields_set:
        mine = getattr(front, name)
        if name == "tools":
            values[name] = tuple(dict.fromkeys((*parent.tools, *mine)))
        elif name == "skills":
            values[name] = ALL if ALL in (parent.skills, mine) else tuple(dict.fromkeys((*parent.skills, *mine)))
        elif name == "endings":
            values[name] = {**parent.endings, **mine}
        elif isinstance(mine, Strict) and isinstance(values[name], Strict) and type(mine) is type(values[name]):
            values[name] = _merge(values[name], mine)
        else:
            values[name] = mine
    values["extends"] = front.extends
    return values


def _command(
    name: str,
    file: File,
    live: Mapping[str, Bot],
    kit_bots: Mapping[str, Bot],
    tool_names: set[str],
    tools: Mapping[str, Tool],
    errors: list[CompileError],
    bot_files: set[str],
    settings: Settings,
) -> Command | None:
    front: CommandFile = file.front
    before = len(errors)
    prompt = file.parsed.body.strip()

    def refuse(line: int, message: str) -> None:
        errors.append(CompileError(file.path, line, message))

    if name in RESERVED_COMMANDS:
        refuse(1, f"!{name} is the service's own command (its own: {listed('!' + c for c in RESERVED_COMMANDS)})")
    offered: tuple[str, ...] = settings.kinds.commanded[:1]
    if front.bot is not None:
        bot = live.get(front.bot)
        if bot is None and front.bot in bot_files:
            pass  # its file has errors of its own
        elif bot is None:
            if front.bot in kit_bots:
                refuse(
                    file.line("bot"),
                    f"bot: '{front.bot}' is the kit's and off; turn it on with content/bots/{front.bot}.md"
                    f" (extends: {front.bot})",
                )
            else:
                refuse(file.line("bot"), f"bot: '{front.bot}' is not a bot (content/bots: {listed(live)})")
        else:
            offered = tuple(s for s in bot.surfaces if s in settings.kinds.commanded)
            if front.surfaces is None and not offered:
                refuse(file.line("bot"), f"!{name} has nowhere to be offered: its bot '{bot.slug}' is only on {', '.join(bot.surfaces)}")
            for index, surface in enumerate(front.surfaces or ()):
                if surface not in bot.surfaces:
                    refuse(
                        file.line("surfaces", index),
                        f"surfaces: !{name} is offered on {surface}, but its bot '{bot.slug}' is not"
                        f" ({bot.source_path} surfaces: {', '.join(bot.surfaces)})",
                    )
        if not prompt:
            refuse(file.parsed.closing_line, "a command that asks a bot needs a prompt: the body is empty")
    else:
        assert front.tool is not None
        if front.tool not in tool_names:
            refuse(file.line("tool"), f"tool: '{front.tool}' is not a tool ({_tools_listed(tools, settings)})")
        elif front.tool in tools and (needs := tools[front.tool].needs) is not None:
            offered = (needs,)
            for index, surface in enumerate(front.surfaces or ()):
                if surface not in offered:
                    refuse(file.line("surfaces", index), f"surfaces: !{name} runs '{front.tool}', which needs: {needs}; it cannot run on {surface}")
        if prompt:
            refuse(file.parsed.closing_line + 1, "a command that runs a tool has no prompt: the body must be empty")

    names = {arg.name for arg in front.args}
    for index, line in enumerate(file.parsed.body.split("\n")):
        for placeholder in PLACEHOLDER.findall(line):
            if placeholder not in names:
                refuse(
                    file.body_line(index),
                    f"{{{placeholder}}} is not an argument of !{name} (args: {listed(arg.name for arg in front.args)})",
                )
    if len(errors) > before:
        return None
    values = _fields(front, CommandFile)
    values["surfaces"] = front.surfaces if front.surfaces is not None else offered
    return Command(**values, name=name, prompt=prompt, source_path=file.path, file=front)
