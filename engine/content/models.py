"""The compiled content's models, gathered under the name the first cut used."""

from __future__ import annotations

from engine.content.base import CompileError, Strict
from engine.content.bots import Bot, BotFile, Limits, bot_fields
from engine.content.hears import EventTrigger, Schedule, ScheduleTrigger
from engine.content.parts import Arg, Command, CommandFile, Operation, Skill, SkillFile, Tool, ToolFile
from engine.content.registry import Registry

__all__ = [
    "Arg",
    "Bot",
    "BotFile",
    "Command",
    "CommandFile",
    "CompileError",
    "EventTrigger",
    "Limits",
    "Operation",
    "Registry",
    "Schedule",
    "ScheduleTrigger",
    "Skill",
    "SkillFile",
    "Strict",
    "Tool",
    "ToolFile",
    "bot_fields",
]
