"""The worker's hands: what a run may use (``offered``, pure), who asked (read from the room, for the
``for:`` of tools and skills), and running a tool the model named. An adapter: it reads the database.

A tool is handed a ``RunRef`` — never a person. One that was not offered is answered exactly as one that
does not exist. A tool's failure goes back to the model as an error result it can act on.

A tool with side effects (one that says so, ``SideEffects``; an OpenAPI operation that is not a read) is done
at most once per run and call id (SPEC §15): its call is recorded as begun — only while the worker holds the
run's lease — before it runs, and its result when it returns (``tool_calls``). The same call seen again gets
that first result (``first_result``: the next holder of a run closing a call its predecessor never reported
back), and one begun and never reported back is not run again.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

from engine.content import Registry
from engine.content.audience import AudienceFacts
from engine.core.messages import Step, ToolSpec
from engine.errors import StoreError, ToolError
from engine.store import Families
from engine.store.runs import Run
from engine.surface import Surface
from engine.tools.base import (
    BUILTIN_SPECS,
    ContentTools,
    Handed,
    Offered,
    RunRef,
    SideEffects,
    ToolFn,
    is_personal,
    offered,
)

log = logging.getLogger(__name__)

UNKNOWN_TOOL = "There is no tool named {name!r}."
UNKNOWN_SKILL = "There is no skill named {name!r}."
UNAVAILABLE_TOOL = "The tool {name!r} is not available right now."
FAILED_TOOL = ("The tool {name!r} failed because of a problem on this site's side (it has been logged). Tell the "
               "person it did not work; do not say it was done.")
BEGUN_BEFORE = ("This tool call was begun before and never reported back; it may or may not have taken effect. It "
                "was not done again.")
# HTTP methods that only read: an OpenAPI operation with any other changes something.
READS = frozenset({"GET", "HEAD", "OPTIONS"})

# The site's classes of a person (customer, tier:gold, …), read from its people tables.
SiteClasses = Callable[[str], Awaitable[frozenset[str]]]


class ToolRunner:
    def __init__(
        self, registry: Callable[[], Registry], surfaces: Mapping[str, Surface], db: Families, *,
        tools: Mapping[str, ToolFn] | None = None, harness: Mapping[str, ToolFn] | None = None,
        content_tools: ContentTools | None = None, site_classes: SiteClasses | None = None,
        surface_tools: Collection[str] = (), handed: Mapping[str, Handed] | None = None,
    ) -> None:
        """``tools`` are the built-ins' implementations (a bot is offered those its file lists): the engine's,
        and those of ``surface_tools``, the built-ins the surfaces registered; ``harness`` are a test's or a
        bench's own tools, offered to every run — never given in production. ``content_tools`` runs the
        site's OpenAPI and code tools. ``handed``: by surface, the tools it hands to its asker's client."""
        unknown = sorted(set(tools or ()) - set(BUILTIN_SPECS) - set(surface_tools))
        if unknown:
            raise ValueError(f"not built-in tools: {', '.join(unknown)} (a test's own tools are its harness)")
        self._registry = registry
        self.surfaces = surfaces
        self.db = db
        self.tools = dict(tools or {})
        self.harness = dict(harness or {})
        self.content_tools = content_tools
        self.site_classes = site_classes
        self.handed = dict(handed or {})

    def offer(self, run: RunRef, steps: list[Step], facts: AudienceFacts | None, *,
              only: frozenset[str] | None = None) -> Offered:
        """What the run may use next; ``only``: the most it may (what its standing note allows), or None."""
        harness = {name: ToolSpec(name, f"The {name} tool.") for name in self.harness}
        registry = self._registry()
        offer = offered(run, steps, registry, facts, harness=harness, only=only)
        hands = self.handed.get(run.surface)
        bot = registry.get(run.bot)
        if hands is None or bot is None or only is not None:
            return offer
        # What the bot's file says its asker's client runs, on the surface that hands them over (and nowhere else).
        extra = tuple(spec for spec in hands.specs(bot) if spec.name not in offer.names)
        if not extra:
            return offer
        return dataclasses.replace(offer, tools=(*offer.tools, *extra), handed=frozenset(s.name for s in extra))

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
        facts = await surface.facts(self.db, row.place, asker, site_classes=classes)
        if facts.private:
            subject = await self.db.people.subject(row.id)
            if subject is None or not subject.is_asker:
                log.info("run %s is not about whoever asked it: nothing personal is offered", row.id,
                         extra={"run": row.id, "bot": row.bot})
                facts = dataclasses.replace(facts, private=False)
        return facts

    async def run(self, run: RunRef, offer: Offered, name: str, arguments: dict[str, Any], *,
                  call_id: str | None = None, holder: str | None = None) -> tuple[str, bool]:
        """The tool's result and whether it is an error. Withheld is absent, never refused. With ``call_id`` (the
        model's id for the call) and ``holder`` (the worker holding the run's lease), a tool with side effects is
        done at most once for that run and call id; ``LeaseLost`` when the lease is not held to begin it."""
        if name not in offer.names:
            return UNKNOWN_TOOL.format(name=name), True
        if name in offer.handed:
            # The client runs it, once: handed over under the model's call id (the surface keeps it by that id).
            return await self.handed[run.surface].call(run, call_id or f"call_{run.id}_{name}", name, arguments)
        if call_id is None or holder is None or not self._has_side_effects(offer, name):
            return await self._call(run, offer, name, arguments)
        begun = await self.db.runs.begin_tool_call(run.id, call_id, name, holder)
        where = {"run": run.id, "bot": run.bot}
        if not begun.first:
            if begun.result is None:
                log.warning("tool %s, call %s, was begun before and never reported back: not done again", name,
                            call_id, extra=where)
                return BEGUN_BEFORE, True
            log.info("tool %s, call %s, was done before: its first result is returned", name, call_id, extra=where)
            return begun.result.result, begun.result.is_error
        content, is_error = await self._call(run, offer, name, arguments)
        try:
            await self.db.runs.end_tool_call(run.id, call_id, holder, content, is_error)
        except StoreError as exc:
            # The result still goes to the model; a holder after this one would say the call was interrupted.
            log.warning("tool %s, call %s: its result could not be kept (%s)", name, call_id, exc, extra=where)
        return content, is_error

    async def first_result(self, run_id: int, call_id: str) -> tuple[str, bool] | None:
        """What a side-effecting call returned when it was done (a predecessor's, never reported back in a
        step); None when no such call finished."""
        done = await self.db.runs.tool_call_result(run_id, call_id)
        return None if done is None else (done.result, done.is_error)

    def _has_side_effects(self, offer: Offered, name: str) -> bool:
        target = offer.targets.get(name)
        if target is not None:
            tool = self._registry().tools.get(target[0])
            operation = next((op for op in tool.allowed if op.operation_id == target[1]), None) if tool else None
            return operation is not None and operation.method.upper() not in READS
        return isinstance(self.tools.get(name) or self.harness.get(name), SideEffects)

    async def _call(self, run: RunRef, offer: Offered, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
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
