"""Content (bots, skills, tools, commands, strings) compiled from markdown into strict models.

Pure: text in, a Registry or a list of CompileErrors out. Reading the files (the site's, the kit's,
and the specs and modules they name) is ``engine.content.files``; writing a bot back is ``write``.
"""

from __future__ import annotations

from engine.content.audience import (
    Audience,
    AudienceError,
    AudienceFacts,
    Term,
    admits,
    parse_audience,
)
from engine.content.compile import compile_bot, compile_sources, references
from engine.content.kinds import Key, Kind, Kinds
from engine.content.models import (
    Arg,
    Bot,
    BotFile,
    Command,
    CommandFile,
    CompileError,
    EventTrigger,
    Limits,
    Operation,
    Registry,
    Schedule,
    ScheduleTrigger,
    Skill,
    SkillFile,
    Tool,
    ToolFile,
)
from engine.content.openapi import Unavailable
from engine.content.strings import Strings
from engine.content.write import write_bot, write_command, write_skill, write_tool

__all__ = [
    "Arg",
    "Audience",
    "AudienceError",
    "AudienceFacts",
    "Bot",
    "BotFile",
    "Command",
    "CommandFile",
    "CompileError",
    "EventTrigger",
    "Key",
    "Kind",
    "Kinds",
    "Limits",
    "Operation",
    "Registry",
    "Schedule",
    "ScheduleTrigger",
    "Skill",
    "SkillFile",
    "Strings",
    "Term",
    "Tool",
    "ToolFile",
    "Unavailable",
    "admits",
    "compile_bot",
    "compile_sources",
    "parse_audience",
    "references",
    "write_bot",
    "write_command",
    "write_skill",
    "write_tool",
]
