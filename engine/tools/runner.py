"""The worker's hands: what a run may use (``offered``, pure), who asked (read from the room, for the
``for:`` of tools and skills), and running a tool the model named. An adapter: it reads the database.

A tool is handed a ``RunRef`` — never a person. One that was not offered is answered exactly as one that
does not exist. A tool's failure goes back to the model as an error result it can act on.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from engine.content import Registry
from engine.content.audience import AudienceFacts
from engine.core.messages import Step, ToolSpec
from engine.errors import ToolError
from engine.store import Families
from engine.store.runs import Run
from engine.surface import Surface
from engine.tools.base import BUILTIN_SPECS, ContentTools, Offered, RunRef, ToolFn, is_personal, offered

log = logging.getLogger(__name__)

UNKNOWN_TOOL = "There is no tool named {name!r}."
UNKNOWN_SKILL = "There is no skill named {name!r}."
UNAVAILABLE_TOOL = "The tool {name!r} is not available right now."
FAILED_TOOL = ("The tool {name!r} failed because of a problem on this site's side (it has been logged). Tell the "
               "person it did not work; do not say it was done.")

# The site's classes of a person (customer, tier:gold, …), read from its people tables.
SiteClasses = Callable[[str], Awaitable[frozenset[str]]]


class ToolRunner:
    def __init__(
        self, registry: Callable[[], Registry], surfaces: Mapping[str, Surface], db: Families, *,
        tools: Mapping[str, ToolFn] | None = None, harness: Mapping[str, ToolFn] | None = None,
        content_tools: ContentTools | None = None, site_classes: SiteClasses | None = None,
    ) -> None:
        """``tools`` are the built-ins' implementations (a bot is offered those its file lists);
        ``harness`` are a test's or a bench's own tools, offered to every run — never given in production.
        ``content_tools`` runs the site's OpenAPI and code tools."""
        unknown = sorted(set(tools or ()) - set(BUILTIN_SPECS))
        if unknown:
            raise ValueError(f"not built-in tools: {', '.join(unknown)} (a test's own tools are its harness)")
        self._registry = registry
        self.surfaces = surfaces
        self.db = db
        self.tools = dict(tools or {})
        self.harness = dict(harness or {})
        self.content_tools = content_tools
        self.site_classes = site_classes

    def offer(self, run: RunRef, steps: list[Step], facts: AudienceFacts | None, *,
              only: frozenset[str] | None = None) -> Offered:
        """What the run may use next; ``only``: the most it may (what its standing note allows), or None."""
        harness = {name: ToolSpec(name, f"The {name} tool.") for name in self.harness}
        return offered(run, steps, self._registry(), facts, harness=harness, only=only)

    async def asker(self, row: Run) -> AudienceFacts | None:
        """What is known about whoever asked the run, now (None: nobody asked — a schedule, an event), as
        the surface it was asked on says.

        ``private`` (the place is read by them alone) is kept only when the asker is also whom the run is
        about, as ``agent_subject_v1`` resolves it from the run row: a personal tool answers about the
        subject, and somebody else's private place says nothing about who reads the subject's data."""
        asker = row.asked_by
        if asker is None:
            return None
        registry = self._registry()
        surface = self.surfaces.get(row.surface)
        if surface is None or not _gated(registry, row.bot):
            # Nothing this bot may use has an audience or is personal: who asked changes nothing, so
            # nothing is read.
            return AudienceFacts(user_id=asker, local_server=registry.server_name)
        classes = await self.site_classes(asker) if self.site_classes is not None else frozenset()
        facts = await surface.facts(self.db, row.room_id, asker, site_classes=classes)
        if facts.private:
            subject = await self.db.people.subject(row.id)
            if subject is None or not subject.is_asker:
                log.info("run %s is not about whoever asked it: nothing personal is offered", row.id,
                         extra={"run": row.id, "bot": row.bot})
                facts = dataclasses.replace(facts, private=False)
        return facts

    async def run(self, run: RunRef, offer: Offered, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        """The tool's result and whether it is an error. Withheld is absent, never refused."""
        if name not in offer.names:
            return UNKNOWN_TOOL.format(name=name), True
        try:
            if name == "open_skill":
                skill = offer.skill(str(arguments.get("name", "")))
                if skill is None:
                    return UNKNOWN_SKILL.format(name=arguments.get("name")), True
                return skill.text, False
            target = offer.targets.get(name)
            if target is not None:
                tool = self._registry().tools.get(target[0])
                if tool is None or self.content_tools is None:
                    return UNKNOWN_TOOL.format(name=name), True
                return await self.content_tools.call(tool, target[1], run, arguments), False
            fn = self.tools.get(name) or self.harness.get(name)
            if fn is None:
                log.error("tool %s is offered but this worker has no implementation of it", name,
                          extra={"run": run.id})
                return UNAVAILABLE_TOOL.format(name=name), True
            return await fn(run, arguments), False
        except ToolError as exc:
            return str(exc), True
        except Exception:  # the model is told it failed, in words; the details are the operator's (logged)
            log.warning("tool %s failed", name, exc_info=True, extra={"run": run.id, "bot": run.bot})
            return FAILED_TOOL.format(name=name), True


def _gated(registry: Registry, slug: str) -> bool:
    """Whether any skill or tool the bot may be offered has an audience (``for:``) or is personal."""
    bot = registry.get(slug) or registry.kit_bots.get(slug)
    if bot is None:
        return False
    skills = registry.skills_of(bot)
    names = {*bot.tools, *(t for skill in skills for t in skill.tools)}
    return any(s.audience is not None for s in skills) or any(
        is_personal(name, tool := registry.tools.get(name)) or (tool is not None and tool.audience is not None)
        for name in names)
