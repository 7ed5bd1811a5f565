"""The way back: a compiled thing → the text of its file, writing only what differs from the
defaults, so an admin can edit a bot as fields and the file stays one a person would write.
``compile(write(x)) == x`` is tested for every shipped file and for generated ones.

A bot that ``extends:`` another writes every key its file set, even one equal to the default: there
it means "not what the parent says".
"""

from __future__ import annotations

from typing import Any

import yaml

from engine.content.base import Strict
from engine.content.bots import Bot, bot_fields
from engine.content.parts import Command, CommandFile, Skill, SkillFile, Tool, ToolFile


class _Dumper(yaml.SafeDumper):
    """Safe YAML; a string that could read as anything else (``off``, ``10:30``) comes out quoted."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


class _FrontMatter(dict[str, Any]):
    """The front matter itself: always one key a line, as a person writes it (a file whose keys are all
    scalars would otherwise come out as one ``{name: B, for: x}`` line)."""


def _front(dumper: yaml.SafeDumper, value: _FrontMatter) -> yaml.MappingNode:
    return dumper.represent_mapping("tag:yaml.org,2002:map", value.items(), flow_style=False)


_Dumper.add_representer(str, _str)
_Dumper.add_representer(_FrontMatter, _front)


def write_file(front: Strict, body: str, *, keep_set: bool = False) -> str:
    """Front matter (what differs from the defaults — or, with ``keep_set``, what was set) and body."""
    data: dict[str, Any] = front.model_dump(
        mode="json", by_alias=True, exclude_defaults=not keep_set, exclude_unset=keep_set
    )
    text = ""
    if data:
        text = yaml.dump(
            _FrontMatter(data), Dumper=_Dumper, sort_keys=False, allow_unicode=True, default_flow_style=None,
            width=100,
        )
    body = body.strip()
    return f"---\n{text}---\n{body}\n" if body else f"---\n{text}---\n"


def write_bot(bot: Bot) -> str:
    # A bot compiled without its file: its own words were checked when it compiled.
    said = tuple(trigger for trigger in bot.hears if isinstance(trigger, str))
    file = bot.file if bot.file is not None else bot.front_model.model_validate(bot_fields(bot), context={"triggers": said})
    return write_file(file, bot.body if bot.file is not None else bot.prompt, keep_set=file.extends is not None)


def write_skill(skill: Skill) -> str:
    return write_file(SkillFile(**{name: getattr(skill, name) for name in SkillFile.model_fields}), skill.text)


def write_tool(tool: Tool) -> str:
    return write_file(ToolFile(**{name: getattr(tool, name) for name in ToolFile.model_fields}), tool.notes)


def write_command(command: Command) -> str:
    file = command.file if command.file is not None else CommandFile(
        **{name: getattr(command, name) for name in CommandFile.model_fields}
    )
    return write_file(file, command.prompt)
