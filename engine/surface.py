"""The one door out: what a surface (Matrix rooms today; the desk, the door and member bots' rooms next)
implements so the engine can work with it without knowing what it is.

The engine asks a surface four things, and only these:

- ``facts``: who a person is *there* — a member? a moderator? an admin? is the place theirs alone, read by
  no other human (``private``: a Matrix room whose only joined or invited person is them; their own desk
  conversation)? — as plain facts (a Matrix room reads them off its own power levels and stored members);
  what a bot's ``for:``, ``serves:`` and a tool's ``for:`` are checked against, and where a personal tool
  may be offered;
- ``deliver``: an answer, or the ending, queued in the transaction that finishes the run, so an answer is
  stored and queued for delivery in one commit (nothing answered is lost, nothing is delivered for a run
  that did not finish); choices are the surface's to show;
- ``working``: that a run is being worked on (typing, a progress line), best effort;
- ``published``: content was (re)published — show its commands wherever this surface shows commands.

The other way in is ``engine.run.summon``: a surface asks for a run there, with every refusal.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from engine.content import Registry
from engine.content.audience import AudienceFacts
from engine.core.messages import Ending
from engine.store import Families, Tx
from engine.store.runs import Run


@dataclass(frozen=True)
class RunInfo:
    """What a surface needs to know about a run to deliver to it."""

    id: int
    bot: str
    surface: str
    place: str | None
    thread: str | None
    trigger_event: str | None
    asked_by: str | None

    @classmethod
    def of(cls, run: Run) -> RunInfo:
        return cls(id=run.id, bot=run.bot, surface=run.surface, place=run.place, thread=run.thread,
                   trigger_event=run.trigger_event, asked_by=run.asked_by)


@dataclass(frozen=True)
class Answered:
    text: str


@dataclass(frozen=True)
class Ended:
    ending: Ending
    reason: str = ""


Outcome = Answered | Ended

@dataclass(frozen=True)
class Opened:
    """A run's standing note, opened: the words the model reads, and — when what it opened says so — the only
    tools the run may be offered (a member bot's edition uses its charter's tools, never all its host's)."""

    note: str
    tools: frozenset[str] | None = None


# What a surface keeps out of a run's stored context and opens only when the model's request is built (a member
# bot's charter, sealed at rest): a context may name one (``{"standing": {"by": <opener>, ...}}``), and the opener
# of that name, given the context, returns the note opened — or None when it cannot be opened (then the run goes
# on without it, and the opener has said why in the log).
Opener = Callable[[Mapping[str, Any]], Awaitable[Opened | None]]


class SurfaceFacts(Protocol):
    """The part of a surface that says who a person is there: all a schedule or an event needs of it."""

    name: str

    async def facts(self, db: Families, place: str | None, user_id: str | None, *,
                    site_classes: frozenset[str] = frozenset()) -> AudienceFacts:
        """What is known about ``user_id`` where the run is (``place``), as they stand now; with no
        room, or nobody, just who they are. Say ``private`` only when sure that no other human reads what
        is said there: a personal tool's answer depends on it."""


class Surface(SurfaceFacts, Protocol):

    async def deliver(self, tx: Tx, run: RunInfo, outcome: Outcome) -> None:
        """Queue the answer or the ending for delivery, in the caller's transaction."""

    async def working(self, run: RunInfo, on: bool) -> None:
        """Show (or stop showing) that the bot is working on the run. Best effort."""

    async def published(self, registry: Registry) -> None:
        """Content was (re)published: show its commands where this surface shows them. Best effort."""
