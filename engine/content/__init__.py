"""Content (bots, later skills, tools, commands, strings) compiled from markdown into strict models.

Pure: text in, a Registry or a list of CompileErrors out. Reading the files is ``engine.contentfiles``.
"""

from __future__ import annotations

from engine.content.audience import (
    Audience,
    AudienceError,
    AudienceFacts,
    Term,
    admits,
    facts_from_power_levels,
    parse_audience,
)
from engine.content.compile import compile_bot, compile_sources
from engine.content.models import Bot, BotFile, CompileError, Limits, Registry

__all__ = [
    "Audience",
    "AudienceError",
    "AudienceFacts",
    "Bot",
    "BotFile",
    "CompileError",
    "Limits",
    "Registry",
    "Term",
    "admits",
    "compile_bot",
    "compile_sources",
    "facts_from_power_levels",
    "parse_audience",
]
